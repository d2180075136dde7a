#!/usr/bin/env escript
%% -*- erlang -*-
%% Armstrong's ring (the same shape as ../lpvm/ring.lua): the main process is member 0,
%% N-1 relays each add 1 and pass the token on; one warm-up round (every relay has then
%% run once), then M timed rounds. hop_ns = timed rounds / (N * M).
%% usage: ERL_FLAGS="+S 1 +P 4000000" escript ring.escript N M
-mode(compile).
-include("common.hrl").

main([NS, MS]) ->
    N = list_to_integer(NS),
    M = list_to_integer(MS),
    T0 = now_s(),
    First = build(N - 1, self(), M + 1),
    T1 = now_s(),
    First ! 0,
    receive V when V =:= N - 1 -> ok end,
    T2 = now_s(),
    rounds(M, First, N),
    T3 = now_s(),
    io:format("RESULT test=ring sys=beam sched=~w n=~w m=~w create_s=~.6f hop_ns=~.2f~n",
              [sched(), N, M, T1 - T0, (T3 - T2) * 1.0e9 / (N * M)]).

build(0, Next, _K) -> Next;
build(I, Next, K) ->
    P = spawn(fun() -> relay(Next, K) end),
    build(I - 1, P, K).

relay(_Next, 0) -> ok;
relay(Next, K) ->
    receive T -> Next ! T + 1, relay(Next, K - 1) end.

rounds(0, _First, _N) -> ok;
rounds(K, First, N) ->
    First ! 0,
    receive V when V =:= N - 1 -> rounds(K - 1, First, N) end.
