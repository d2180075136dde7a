%% dist_peer.erl -- the erl side of test_dist.lua: an agent on a real erl node that
%% the lpvm test drives with messages, answering to the lpvm process that asks.
%% Lua strings arrive as binaries, so the commands are binaries.
-module(dist_peer).
-export([main/1]).

main([Lpvm]) ->
    Node = list_to_atom(Lpvm),
    register(peer, self()),
    Pong = net_adm:ping(Node),
    {lpvm_test, Node} ! {hello, self(), Pong, list_to_binary(os:getpid())},
    loop().

loop() ->
    receive
        {<<"echo">>, From, Data} ->
            From ! {echo_reply, self(), Data};
        {<<"echo_name">>, Name, Node, Data} ->
            {binary_to_atom(Name), binary_to_atom(Node)} ! {echo_reply, self(), Data};
        {<<"long">>, From, N} ->                       % a binary of N bytes, then a mark
            From ! {long, binary:copy(<<"0123456789abcdef">>, N div 16)},
            From ! {long_done, N};
        {<<"bigs">>, From} ->                          % integers past 64 bits, and erl's floats of them
            Bigs = [1 bsl 64, -(1 bsl 64) - 5, 1 bsl 500, (1 bsl 1023) * 3 div 2,
                    123456789012345678901234567890, 1 bsl 1024, -(1 bsl 2000)],
            From ! {bigs, Bigs, [float(X) || X <- lists:sublist(Bigs, 5)]};
        {<<"spawn_idle">>, From} ->                    % a process lpvm links to or monitors
            From ! {idle, spawn(fun idle/0)};
        {<<"spawn_named">>, From, Name} ->             % the same, registered as Name
            P = spawn(fun idle/0),
            register(binary_to_atom(Name), P),
            From ! {named, P};
        {<<"exit_with">>, Pid, Reason} ->
            exit(Pid, binary_to_atom(Reason));
        {<<"link_to">>, From, LpvmPid} ->              % an erl process linked to an lpvm one
            From ! {linked, spawn(fun() -> watch_link(From, LpvmPid) end)};
        {<<"monitor">>, From, LpvmPid} ->
            From ! {monitoring, spawn(fun() -> watch_mon(From, LpvmPid) end)};
        {<<"monitor_name">>, From, Name} ->           % monitor(process, {Name, LpvmNode})
            spawn(fun() -> watch_name(From, {binary_to_atom(Name), node(From)}) end);
        {<<"rpc_cast">>, From, M, F, A} ->           % no answer: the function tells From
            true = rpc:cast(node(From), binary_to_atom(M), binary_to_atom(F), A);
        {<<"rpc">>, From, M, F, A} ->
            From ! {rpc_result, rpc:call(node(From), binary_to_atom(M), binary_to_atom(F), A)};
        {<<"spawn_on">>, From, M, F, A} ->
            From ! {spawned, spawn(node(From), binary_to_atom(M), binary_to_atom(F), A)};
        {<<"refs">>, From, Ours} ->                    % erl's reference and ours, both ways
            R = make_ref(),
            From ! {refs, R, [R, Ours], is_reference(Ours)},
            receive
                {<<"back">>, R2, Ours2} -> From ! {back, R2 =:= R, Ours2 =:= Ours}
            after 10000 -> ok
            end;
        {<<"odd_terms">>, From} ->                     % terms Lua has no twin for
            {ok, U} = gen_udp:open(0),
            From ! {odd_terms, fun() -> ok end, fun lists:map/2, <<1:3>>, [1|2], U, "abc"},
            gen_udp:close(U);
        {<<"forged_fun">>, From} ->                    % damaged bytecode in a function term
            Fun = {lpvm_fun, <<27, "LuaT", 0, "not bytecode">>, []},
            From ! {lpvm_graph, {<<"forged">>, Fun}},
            From ! {forged_spawned, spawn(node(From), erlang, apply, [{lpvm_graph, Fun}, {}])};
        {<<"deep">>, From, N} ->                      % a list nested N levels: [[...[]...]]
            From ! {deep, N, nest(N)};
        {<<"die_deep">>, From, N} ->                  % an erl process linked to From dies so
            spawn(fun() -> link(From), From ! {deep_linked, self()},
                           receive <<"go">> -> exit(nest(N)) end end);
        stop ->
            halt()
    end,
    loop().

idle() -> receive _ -> idle() end.

nest(N) -> lists:foldl(fun(_, A) -> [A] end, [], lists:seq(1, N)).

watch_link(From, Pid) ->
    process_flag(trap_exit, true),
    link(Pid),
    From ! {link_ready, self()},
    receive {'EXIT', Pid, Reason} -> From ! {erl_saw_exit, Pid, Reason} end.

watch_name(From, Target) ->
    Ref = erlang:monitor(process, Target),
    From ! {mon_ready, self()},
    receive {'DOWN', Ref, process, Who, Reason} -> From ! {erl_saw_down_name, Who, Reason} end.

watch_mon(From, Pid) ->
    Ref = erlang:monitor(process, Pid),
    From ! {mon_ready, self()},
    receive {'DOWN', Ref, process, Pid, Reason} -> From ! {erl_saw_down, Pid, Reason} end.
