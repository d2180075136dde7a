#!/usr/bin/env escript
%% -*- erlang -*-
%% Process creation and bytes per idle process (as ../lpvm/create.lua): spawn N
%% processes that each block in receive, read the RSS, then send each one message and
%% wait for all N acknowledgements. bytes_per_proc = RSS growth / N.
%% usage: ERL_FLAGS="+S 1 +P 4000000" escript create.escript N
-mode(compile).
-include("common.hrl").

main([NS]) ->
    N = list_to_integer(NS),
    Rss0 = rss_bytes(),
    Self = self(),
    T0 = now_s(),
    Pids = spawn_n(N, Self, []),
    T1 = now_s(),
    Rss1 = rss_bytes(),
    lists:foreach(fun(P) -> P ! go end, Pids),
    wait_n(N),
    T2 = now_s(),
    io:format("RESULT test=create sys=beam sched=~w n=~w create_s=~.6f send_s=~.6f "
              "rss_start=~w rss_created=~w bytes_per_proc=~.1f~n",
              [sched(), N, T1 - T0, T2 - T1, Rss0, Rss1, (Rss1 - Rss0) / N]).

spawn_n(0, _Parent, Acc) -> Acc;
spawn_n(K, Parent, Acc) ->
    P = spawn(fun() -> receive go -> Parent ! done end end),
    spawn_n(K - 1, Parent, [P | Acc]).

wait_n(0) -> ok;
wait_n(K) -> receive done -> wait_n(K - 1) end.
