#!/usr/bin/env escript
%% estone_ets.escript -- EStone's "ets datadictionary" micro on BEAM, the same work as
%% estone/micros/ets.lua does on lpvm, for docs/estone.md's comparison.
%%   escript estone/estone_ets.escript [LOOPS]     (default 342, EStone's count)
%% Per loop: a set and a private bag; in each, for Beg = 20..39 (J = 1): four inserts,
%% a delete of an absent key, a match_delete, two matches, a delete, first and next.
-mode(compile).

main(Args) ->
    Loops = case Args of [L] -> list_to_integer(L); [] -> 342 end,
    T0 = erlang:monotonic_time(microsecond),
    statistics(runtime),
    loop(Loops),
    {_, CpuMs} = statistics(runtime),
    Us = max(1, erlang:monotonic_time(microsecond) - T0),
    io:format("ets datadictionary: ~b loops in ~.1f ms (~b ms of CPU), ~b estones "
              "(weight 6)~n", [Loops, Us / 1000, CpuMs, round(6 * 6 * 31000000 / Us)]).

loop(0) -> ok;
loop(I) ->
    T1 = ets:new(a, [set]),
    T2 = ets:new(c, [bag, private]),
    tab(T1, 20, 40, 1),
    tab(T2, 20, 40, 1),
    ets:delete(T1),
    ets:delete(T2),
    loop(I - 1).

tab(_Tab, Stop, Stop, _J) -> ok;
tab(Tab, Beg, Stop, J) ->
    ets:insert(Tab, {Beg, J}),
    ets:insert(Tab, {J, Beg}),
    ets:insert(Tab, {{foo, Beg}, J}),
    ets:insert(Tab, {{foo, J}, Beg}),
    ets:delete(Tab, haha),
    ets:match_delete(Tab, {k, j}),
    ets:match(Tab, {Beg, '$1'}),
    ets:match(Tab, {'$1', J}),
    ets:delete(Tab, Beg),
    K = ets:first(Tab),
    ets:next(Tab, K),
    tab(Tab, Beg + 1, Stop, J).
