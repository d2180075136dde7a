#!/usr/bin/env escript
%% -*- erlang -*-
%% EStone's runtime micros on BEAM, the same work as lpvm's ports of them
%% (../../micros/*.lua, described in docs/estone.md), scored as ../../estone.lua scores
%% them: estones = Weight^2 * 31,000,000 / microseconds. Each micro runs in a fresh
%% process. Micros: msgp msgp_medium msgp_huge generic timer links port_io.
%% usage: ERL_FLAGS="+S 1" escript estone.escript [--quick] MICRO[,MICRO...]
%% (--quick: loops / 100, at least 1). Prints RESULT micro=estones ...
-mode(compile).
-include("common.hrl").

%% name -> {weight, loops}: EStone's table
micro(msgp) -> {10, 1515};
micro(msgp_medium) -> {14, 1527};
micro(msgp_huge) -> {4, 52};
micro(generic) -> {9, 7977};
micro(timer) -> {2, 2312};
micro(links) -> {1, 30};
micro(port_io) -> {12, 4800}.

main(["--quick", Names]) -> run_all(Names, 100);
main([Names]) -> run_all(Names, 1).

run_all(Names, Div) ->
    Ms = [list_to_atom(N) || N <- string:lexemes(Names, ",")],
    Fields = [begin
                  {W, Loops} = micro(M),
                  Us = max(1, run_fresh(M, max(1, Loops div Div))),
                  io_lib:format(" ~s=~w ~s_us=~w", [M, round(W * W * 31000000 / Us), M, Us])
              end || M <- Ms],
    io:format("RESULT test=estone sys=beam sched=~w~s~n", [sched(), Fields]).

us() -> erlang:monotonic_time(microsecond).

%% The micro in a fresh process; its time less any set-up time it excludes.
run_fresh(M, Loops) ->
    Top = self(),
    P = spawn(fun() ->
                      T0 = us(),
                      Excluded = run(M, Loops),
                      Top ! {self(), us() - T0 - Excluded}
              end),
    receive {P, Us} -> Us end.

%% ---- message chains (msgp, msgp_medium, msgp_huge) ----
run(msgp, Loops) -> chain(Loops, 4, {self(), true});
run(msgp_medium, Loops) ->
    chain(Loops, 4, {self(), funky_stuff, baby, {1, [123, true, []], "abcdef"}});
run(msgp_huge, Loops) -> chain(Loops, 2, very_big(15));
run(generic, Loops) -> generic(Loops);
run(timer, Loops) -> timer(Loops);
run(links, Loops) -> links(Loops);
run(port_io, Loops) -> port_io(Loops).

%% Per loop: a chain of Len forwarders ending here; 100 round trips of
%% {self(), {message, Msg}}, each waiting for the previous; then stop down the chain.
chain(0, _Len, _Msg) -> 0;
chain(Loops, Len, Msg) ->
    Me = self(),
    P = lists:foldl(fun(_, To) -> spawn(fun() -> fwd(To) end) end, Me, lists:seq(1, Len)),
    round_trips(100, P, Msg),
    P ! stop,
    receive stop -> ok end,
    chain(Loops - 1, Len, Msg).

fwd(To) ->
    receive
        stop -> To ! stop;
        {_From, {message, X}} -> To ! {self(), {message, X}}, fwd(To)
    end.

round_trips(0, _P, _Msg) -> ok;
round_trips(K, P, Msg) ->
    P ! {self(), {message, Msg}},
    receive {_, {message, _}} -> round_trips(K - 1, P, Msg) end.

%% {1,2,3,a,v,f,r,t,y,u,self(),self(),self(),"22222222222222222",{{"234",self()}},[[very_big(I-1)]]}
very_big(0) -> [];
very_big(I) ->
    S = self(),
    {1, 2, 3, a, v, f, r, t, y, u, S, S, S, "22222222222222222", {{"234", S}}, [[very_big(I - 1)]]}.

%% ---- generic: a server registered as funky, 22 calls a loop with a 2000 ms timeout ----
generic(Loops) ->
    Server = spawn(fun() -> gserv([]) end),
    true = register(funky, Server),
    calls(Loops),
    Ref = monitor(process, Server),
    exit(whereis(funky), kill),
    receive {'DOWN', Ref, _, _, _} -> 0 end.

gserv(State) ->
    receive
        {From, Ref, {call, Req}} ->
            {reply, Reply, State2} = handle_call(Req, State),
            From ! {funky, Ref, Reply},
            gserv(State2)
    end.

handle_call(xyz, _State) -> {reply, xyz, []};
handle_call(abc, State) -> R = 1 + 3, {reply, R, [R | State]}.

req(Req) ->
    Ref = make_ref(),
    funky ! {self(), Ref, {call, Req}},
    receive {funky, Ref, Reply} -> Reply
    after 2000 -> exit(timeout)
    end.

calls(0) -> ok;
calls(K) ->
    [req(R) || R <- [abc, abc, abc, abc, xyz, abc, abc, abc, abc, abc, abc,
                     abc, abc, abc, abc, xyz, abc, abc, abc, abc, abc, abc]],
    calls(K - 1).

%% ---- timer: 100 messages to self, each taken under a timeout that never fires ----
timer(Loops) -> timer(Loops, [50, 50, 50, 100, 1000, 3000, 8000, 50000, 100000], 0).

timer(0, _L, _J) -> 0;
timer(Loops, L, J) ->
    [self() ! hi_dude || _ <- lists:seq(1, 100)],
    J2 = lists:foldl(fun(_, Jx) ->
                             T = lists:nth(Jx rem length(L) + 1, L),
                             receive hi_dude -> ok after T -> exit(timer_fired) end,
                             Jx + 1
                     end, J, lists:seq(1, 100)),
    timer(Loops - 1, L, J2).

%% ---- links: 100 linked processes trapping exits, each links to and unlinks from
%% the others in turn, Loops rounds ----
links(Loops) ->
    Me = self(),
    Ps = [spawn_link(fun() -> linker(Me) end) || _ <- lists:seq(1, 100)],
    [P ! {procs, Ps, Loops} || P <- Ps],
    [receive {P, done} -> ok end || P <- Ps],
    0.

linker(Top) ->
    process_flag(trap_exit, true),
    {Procs, I} = receive {procs, Ps, N} -> {Ps, N} end,
    link_walk(I, Procs, link),
    Top ! {self(), done}.

link_walk(0, _Procs, _Op) -> ok;
link_walk(I, Procs, Op) ->
    Op2 = lists:foldl(fun(P, link) -> link(P), unlink;
                         (P, unlink) -> unlink(P), link
                      end, Op, Procs),
    link_walk(I - 1, Procs, case Op2 of link -> unlink; unlink -> link end).

%% ---- port_io: 5 processes, each echoes a 200-byte and a 5-byte command Loops times
%% through its own cat; the spawning is not counted ----
port_io(Loops) ->
    Me = self(),
    T0 = us(),
    Ps = [spawn(fun() -> ppp(Me, Loops) end) || _ <- lists:seq(1, 5)],
    [P ! go || P <- Ps],
    Before = us() - T0,
    [receive {P, ok} -> ok end || P <- Ps],
    Before.

ppp(Top, I) ->
    Port = open_port({spawn, "cat"}, [binary, stream]),
    receive go -> ok end,
    echo(Port, I, binary:copy(<<"X">>, 200)),
    echo(Port, I, <<"abcde">>),
    port_close(Port),
    Top ! {self(), ok}.

echo(_Port, 0, _Cmd) -> ok;
echo(Port, I, Cmd) ->
    Port ! {self(), {command, Cmd}},
    collect(Port, byte_size(Cmd)),
    echo(Port, I - 1, Cmd).

collect(_Port, Left) when Left =< 0 -> ok;
collect(Port, Left) ->
    receive {Port, {data, D}} -> collect(Port, Left - byte_size(D)) end.
