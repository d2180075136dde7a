#!/usr/bin/env escript
%% bench_otp.escript -- the BEAM side of estone/bench_otp.sh (same cases, same output).
%%   escript estone/bench_otp.escript refcall QUEUED N
%%   escript estone/bench_otp.escript gs_call QUEUED N
%%   escript estone/bench_otp.escript sup K
-mode(compile).
-behaviour(gen_server).
-export([init/1, handle_call/3, handle_cast/2, start_echo/1]).

start_echo(I) -> gen_server:start_link(?MODULE, I, []).

init(sup) ->
    {ok, {#{strategy => simple_one_for_one},
          [#{id => echo, start => {?MODULE, start_echo, []}}]}};
init(_) -> {ok, 0}.
handle_call(Req, _From, S) -> {reply, Req, S}.
handle_cast(_, S) -> {noreply, S}.

main(["refcall", Q, N]) ->
    Srv = spawn(fun srv/0),
    fill(list_to_integer(Q)),
    Calls = list_to_integer(N),
    T0 = erlang:monotonic_time(nanosecond),
    refcalls(Srv, Calls),
    Dt = erlang:monotonic_time(nanosecond) - T0,
    io:format("refcall n=~b ns_per_call=~b queued=~s~n", [Calls, Dt div Calls, Q]);
main(["gs_call", Q, N]) ->
    {ok, Srv} = gen_server:start(?MODULE, [], []),
    fill(list_to_integer(Q)),
    Calls = list_to_integer(N),
    T0 = erlang:monotonic_time(nanosecond),
    gs_calls(Srv, Calls),
    Dt = erlang:monotonic_time(nanosecond) - T0,
    gen_server:stop(Srv),
    io:format("gs_call n=~b ns_per_call=~b queued=~s~n", [Calls, Dt div Calls, Q]);
main(["sup", K]) ->
    N = list_to_integer(K),
    process_flag(trap_exit, true),
    T0 = erlang:monotonic_time(microsecond),
    {ok, Sup} = supervisor:start_link(?MODULE, sup),
    [{ok, _} = supervisor:start_child(Sup, [I]) || I <- lists:seq(1, N)],
    T1 = erlang:monotonic_time(microsecond),
    unlink(Sup),
    Ref = monitor(process, Sup),
    exit(Sup, shutdown),
    receive {'DOWN', Ref, _, _, _} -> ok end,
    T2 = erlang:monotonic_time(microsecond),
    io:format("sup k=~b start_us_per_child=~b stop_us_per_child=~b~n",
              [N, (T1 - T0) div N, (T2 - T1) div N]);
main(_) ->
    io:format(standard_error, "bench_otp.escript: unknown case~n", []),
    halt(2).

fill(0) -> ok;
fill(K) -> self() ! {junk, K}, fill(K - 1).

srv() ->
    receive
        {Alias, Tag, Req} -> Alias ! {Tag, Req}, srv();
        stop -> ok
    end.

refcalls(_, 0) -> ok;
refcalls(Srv, K) ->
    M = monitor(process, Srv, [{alias, demonitor}]),
    Srv ! {M, M, K},
    receive
        {M, K} -> demonitor(M, [flush]), refcalls(Srv, K - 1);
        {'DOWN', M, _, _, R} -> exit(R)
    end.

gs_calls(_, 0) -> ok;
gs_calls(Srv, K) ->
    K = gen_server:call(Srv, K),
    gs_calls(Srv, K - 1).
