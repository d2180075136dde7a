#!/usr/bin/env escript
%% -*- erlang -*-
%% K sends of the same binary of Size bytes to one receiver, back to back (as
%% ../lpvm/msgsize.lua); the time runs until the receiver has taken the K-th.
%% (> 64 bytes is a reference-counted binary: BEAM copies only a handle.)
%% usage: ERL_FLAGS="+S 1" escript msgsize.escript Size K
-mode(compile).
-include("common.hrl").

main([SizeS, KS]) ->
    Size = list_to_integer(SizeS),
    K = list_to_integer(KS),
    Msg = binary:copy(<<"x">>, Size),
    Parent = self(),
    R = spawn(fun() -> recv(K), Parent ! {done, now_s()} end),
    T0 = now_s(),
    send_n(R, Msg, K),
    T2 = receive {done, T} -> T end,
    io:format("RESULT test=msgsize sys=beam sched=~w size=~w k=~w per_msg_ns=~.1f~n",
              [sched(), Size, K, (T2 - T0) * 1.0e9 / K]).

send_n(_R, _Msg, 0) -> ok;
send_n(R, Msg, K) -> R ! Msg, send_n(R, Msg, K - 1).

recv(0) -> ok;
recv(K) -> receive _ -> recv(K - 1) end.
