%% Shared helpers of the compare escripts (-include("common.hrl")): a monotonic clock in
%% seconds, the VM's RSS from /proc, and the scheduler count for the RESULT line.
-compile([nowarn_unused_function]).
now_s() -> erlang:monotonic_time(nanosecond) / 1.0e9.

proc_status_kb(Key) ->
    {ok, Bin} = file:read_file("/proc/self/status"),
    KeyB = list_to_binary(Key),
    Len = byte_size(KeyB),
    case [L || L <- binary:split(Bin, <<"\n">>, [global]),
               byte_size(L) > Len, binary:part(L, 0, Len) =:= KeyB] of
        [Line | _] ->
            [_, Rest] = binary:split(Line, <<":">>),
            [Num | _] = binary:split(string:trim(Rest), <<" ">>),
            binary_to_integer(Num);
        [] -> -1
    end.

rss_bytes() -> proc_status_kb("VmRSS") * 1024.
sched() -> erlang:system_info(schedulers_online).
