#!/usr/bin/env escript
%% -*- erlang -*-
%% Runtime micro-benchmarks (the same work as ../lpvm/micro.lua does on lpvm):
%%   chain N        a chain of 4 processes, 100 round trips of a small message
%%                  main->p1->p2->p3->p4->main, then the chain stops; N times (1500)
%%   call N         request/reply to a server loop, make_ref and receive..after 2000 (100000)
%%   timer_after N  ping-pong, the client waits with receive..after 10000: a timer armed
%%                  and cancelled that never fires (100000)
%%   start_timer N  erlang:start_timer(10000, ...) + cancel_timer (100000)
%%   links N        100 processes, each link/1 + unlink/1 with each of the other 99,
%%                  N rounds (30)
%%   spawn_exit N   spawn N processes that return at once; until all are gone (1000000)
%% usage: ERL_FLAGS="+S 1" escript micro.escript TEST [N]
-mode(compile).
-include("common.hrl").

main([Test]) -> main([Test, default]);
main([Test, NS]) ->
    N = case NS of default -> default(Test); _ -> list_to_integer(NS) end,
    erlang:garbage_collect(),
    {Ops, Extra, T} = run(list_to_atom(Test), N),
    io:format("RESULT test=micro sys=beam sched=~w bench=~s ops=~w total_s=~.6f per_op_ns=~.1f~s~n",
              [sched(), Test, Ops, T, T * 1.0e9 / Ops, Extra]).

default("chain") -> 1500;
default("links") -> 30;
default("spawn_exit") -> 1000000;
default(_) -> 100000.

timed(F) ->
    T0 = now_s(),
    F(),
    now_s() - T0.

%% A message built at run time: a constant term would be a module literal, which BEAM
%% sends without copying.
small_msg() -> {ping, self()}.

run(chain, Reps) ->
    RT = 100,
    Msg = small_msg(),
    T = timed(fun() -> chain_reps(Reps, RT, Msg) end),
    {Reps * RT, io_lib:format(" hop_ns=~.1f", [T * 1.0e9 / (Reps * RT * 5)]), T};
run(call, N) ->
    S = spawn(fun srv_loop/0),
    T = timed(fun() -> calls(S, N) end),
    S ! stop,
    {N, "", T};
run(timer_after, N) ->
    E = spawn(fun echo/0),
    T = timed(fun() -> pingpong_after(E, N) end),
    E ! stop,
    {N, "", T};
run(start_timer, N) ->
    {N, "", timed(fun() -> start_cancel(N) end)};
run(links, Rounds) ->
    NP = 100,
    Self = self(),
    Pids = [spawn(fun() -> linker(Self, Rounds) end) || _ <- lists:seq(1, NP)],
    T = timed(fun() ->
                      [P ! {go, Pids} || P <- Pids],
                      [receive {done, P} -> ok end || P <- Pids]
              end),
    [P ! stop || P <- Pids],
    {NP * (NP - 1) * Rounds, "", T};
run(spawn_exit, N) ->
    Base = erlang:system_info(process_count),
    T = timed(fun() -> spawn_loop(N), wait_procs(Base) end),
    {N, "", T}.

%% ---- chain ----
chain_reps(0, _RT, _Msg) -> ok;
chain_reps(R, RT, Msg) ->
    P4 = spawn(fun() -> receive {next, Next} -> fwd(Next) end end),
    P4 ! {next, self()},
    P3 = spawn(fun() -> fwd(P4) end),
    P2 = spawn(fun() -> fwd(P3) end),
    P1 = spawn(fun() -> fwd(P2) end),
    roundtrips(RT, P1, Msg),
    P1 ! stop,
    receive stop -> ok end,
    chain_reps(R - 1, RT, Msg).

fwd(Next) ->
    receive
        stop -> Next ! stop;
        M -> Next ! M, fwd(Next)
    end.

roundtrips(0, _P1, _Msg) -> ok;
roundtrips(K, P1, Msg) ->
    P1 ! Msg,
    receive Msg -> roundtrips(K - 1, P1, Msg) end.

%% ---- call ----
srv_loop() ->
    receive
        {call, From, Ref, Req} -> From ! {Ref, {reply, Req}}, srv_loop();
        stop -> ok
    end.

calls(_S, 0) -> ok;
calls(S, K) ->
    Ref = make_ref(),
    S ! {call, self(), Ref, K},
    receive
        {Ref, {reply, K}} -> calls(S, K - 1)
    after 2000 -> exit(timeout)
    end.

%% ---- timers ----
echo() ->
    receive
        {From, ping} -> From ! pong, echo();
        stop -> ok
    end.

pingpong_after(_E, 0) -> ok;
pingpong_after(E, K) ->
    E ! {self(), ping},
    receive pong -> pingpong_after(E, K - 1)
    after 10000 -> exit(timer_fired)
    end.

start_cancel(0) -> ok;
start_cancel(K) ->
    Ref = erlang:start_timer(10000, self(), never),
    false =/= erlang:cancel_timer(Ref) orelse exit(already_fired),
    start_cancel(K - 1).

%% ---- links ----
linker(Parent, Rounds) ->
    receive {go, Pids} ->
            Others = [P || P <- Pids, P =/= self()],
            link_rounds(Rounds, Others),
            Parent ! {done, self()},
            receive stop -> ok end
    end.

link_rounds(0, _Others) -> ok;
link_rounds(R, Others) ->
    lists:foreach(fun(P) -> link(P), unlink(P) end, Others),
    link_rounds(R - 1, Others).

%% ---- spawn + exit ----
spawn_loop(0) -> ok;
spawn_loop(K) -> spawn(fun() -> ok end), spawn_loop(K - 1).

wait_procs(Base) ->
    case erlang:system_info(process_count) of
        C when C =< Base -> ok;
        _ -> erlang:yield(), wait_procs(Base)
    end.
