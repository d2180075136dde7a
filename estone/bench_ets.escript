#!/usr/bin/env escript
%%! +sbwt none +sbwtdcpu none +sbwtdio none
%% bench_ets.escript -- the operations of bench_ets.lua on BEAM's ETS, for the
%% side-by-side table of estone/bench_ets.sh.   escript bench_ets.escript OP N P
%% Schedulers do not spin when idle (the %%! line), so statistics(runtime) is the CPU
%% the operations took.
-mode(compile).

main([Op0, N0, P0]) ->
    Op = list_to_atom(Op0), N = list_to_integer(N0), P = list_to_integer(P0),
    M = case os:getenv("ETS_BENCH_OPS") of false -> 1000000; S -> list_to_integer(S) end,
    Kind = case Op of next -> ordered_set; _ -> set end,
    Tab = ets:new(bench, [Kind, public, {read_concurrency, true},
                          {write_concurrency, true}]),
    [ets:insert(Tab, {I, I}) || I <- lists:seq(1, N)],
    Top = self(),
    Pids = [spawn_link(fun() -> worker(Top, Tab, Op, N, M, I) end) || I <- lists:seq(1, P)],
    statistics(runtime),
    [Pid ! go || Pid <- Pids],
    Done = [receive {done, Ns, Ops} -> {Ns, Ops} end || _ <- Pids],
    {_, CpuMs} = statistics(runtime),
    Worst = lists:max([Ns || {Ns, _} <- Done]),
    Total = lists:sum([Ops || {_, Ops} <- Done]),
    io:format("ets op=~s n=~b procs=~b ns_per_op=~b cpu_ns_per_op=~b~n",
              [Op, N, P, round(Worst), round(CpuMs * 1000000 / Total)]);
main(_) ->
    io:format(standard_error, "usage: bench_ets.escript OP N P~n", []),
    halt(2).

worker(Top, Tab, Op, N, M, Id) ->
    receive go -> ok end,
    T0 = erlang:monotonic_time(nanosecond),
    Ops = run(Op, Tab, N, M, Id),
    Top ! {done, (erlang:monotonic_time(nanosecond) - T0) / Ops, Ops}.

run(insert, Tab, N, M, K) -> insert(Tab, N, M, K), M;
run(lookup, Tab, N, M, K) -> lookup(Tab, N, M, K), M;
run(update_counter, Tab, N, M, K) -> counter(Tab, N, M, K), M;
run(next, Tab, _N, M, _K) -> walk(Tab, M, 0).

insert(_, _, 0, _) -> ok;
insert(Tab, N, M, K0) -> K = (K0 + 7919) rem N, ets:insert(Tab, {K + 1, K}), insert(Tab, N, M - 1, K).

lookup(_, _, 0, _) -> ok;
lookup(Tab, N, M, K0) -> K = (K0 + 7919) rem N, ets:lookup(Tab, K + 1), lookup(Tab, N, M - 1, K).

counter(_, _, 0, _) -> ok;
counter(Tab, N, M, K0) -> K = (K0 + 7919) rem N, ets:update_counter(Tab, K + 1, 1), counter(Tab, N, M - 1, K).

walk(_Tab, M, Done) when Done >= M -> Done;
walk(Tab, M, Done) -> walk(Tab, M, pass(Tab, ets:first(Tab), Done)).

pass(_Tab, '$end_of_table', Done) -> Done;
pass(Tab, K, Done) -> pass(Tab, ets:next(Tab, K), Done + 1).
