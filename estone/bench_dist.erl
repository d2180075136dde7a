%% bench_dist.erl -- the erl <-> erl half of bench_dist.sh: the same round trips and
%% one-way messages over one distribution connection as bench_dist.lua.
-module(bench_dist).
-export([server/1, client/3]).

server([Parent]) ->
    P = list_to_atom(Parent),
    Sink = spawn(fun sink/0),
    register(echo, self()),
    {bench, P} ! {ready, self(), Sink},
    echo().

echo() ->
    receive
        {ping, From, X} -> From ! {pong, X}, echo();
        stop -> halt()
    end.

sink() ->
    receive {count, From, M} -> drain(M - 1), From ! {got, M} end,
    sink().

drain(0) -> ok;
drain(K) -> receive _ -> drain(K - 1) end.

client(B, N, M) ->
    register(bench, self()),
    {Echo, Sink} = receive {ready, E, S} -> {E, S} after 20000 -> exit(no_server) end,
    P = <<"0123456789">>,
    [begin Echo ! {ping, self(), P}, receive _ -> ok end end || _ <- lists:seq(1, 1000)],
    T0 = erlang:monotonic_time(microsecond),
    rt(Echo, P, N),
    Rt = (erlang:monotonic_time(microsecond) - T0) / N,
    Sink ! {count, self(), M},
    T1 = erlang:monotonic_time(microsecond),
    send(Sink, P, M - 1),
    receive {got, _} -> ok end,
    PerS = M / ((erlang:monotonic_time(microsecond) - T1) / 1.0e6),
    Echo ! stop,
    io:format("rt_us=~.1f msgs_per_s=~B~n", [Rt, round(PerS)]),
    _ = B.

rt(_, _, 0) -> ok;
rt(E, P, K) -> E ! {ping, self(), P}, receive _ -> rt(E, P, K - 1) end.

send(_, _, 0) -> ok;
send(S, P, K) -> S ! P, send(S, P, K - 1).
