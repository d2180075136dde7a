#!/usr/bin/env escript
%% bench_otp.escript -- the BEAM side of estone/bench_otp.sh (same cases, same output).
%%   escript estone/bench_otp.escript refcall QUEUED N
%%   escript estone/bench_otp.escript gs_call QUEUED N
%%   escript estone/bench_otp.escript sup K
-mode(compile).

main(["refcall", Q, N]) ->
    Srv = spawn(fun srv/0),
    fill(list_to_integer(Q)),
    Calls = list_to_integer(N),
    T0 = erlang:monotonic_time(nanosecond),
    refcalls(Srv, Calls),
    Dt = erlang:monotonic_time(nanosecond) - T0,
    io:format("refcall n=~b ns_per_call=~b queued=~s~n", [Calls, Dt div Calls, Q]);
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
