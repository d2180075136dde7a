#!/usr/bin/env escript
%% -*- erlang -*-
%% The thesis's Figure 4 (seed 003, section 6), as ../lpvm/parallel.lua: for K = 1..MaxK,
%% K identical processes each run the same compute-bound loop of Iter iterations of float
%% arithmetic; the time is until all K have sent their result. With one scheduler it
%% grows about linearly with K; with S schedulers it stays flat up to K = S.
%% usage: ERL_FLAGS="+S 1" escript parallel.escript MaxK Iter
-mode(compile).
-include("common.hrl").

main([MaxKS, IterS]) ->
    MaxK = list_to_integer(MaxKS),
    Iter = list_to_integer(IterS),
    run(1, Iter div 10),   % a warm-up, not counted: the first run pays for first touches
    Ms = [run(K, Iter) || K <- lists:seq(1, MaxK)],
    Fields = [io_lib:format(" k~w_ms=~.1f", [K, M]) || {K, M} <- lists:zip(lists:seq(1, MaxK), Ms)],
    io:format("RESULT test=parallel sys=beam sched=~w iter=~w~s~n", [sched(), Iter, Fields]).

run(K, Iter) ->
    Self = self(),
    T0 = now_s(),
    [spawn(fun() -> Self ! {done, work(1, Iter, 0.0)} end) || _ <- lists:seq(1, K)],
    [receive {done, _} -> ok end || _ <- lists:seq(1, K)],
    (now_s() - T0) * 1000.

%% x = x + (i mod 7) * 0.5 - x / (i + 1.0), as the Lua loop
work(I, N, X) when I > N -> X;
work(I, N, X) -> work(I + 1, N, X + (I rem 7) * 0.5 - X / (I + 1.0)).
