#!/usr/bin/env escript
%% -*- erlang -*-
%% The luaproc report's HTTP benchmark page (numbers 1..5000, built anew per request)
%% served by BEAM with gen_tcp: an acceptor pool, one process per connection,
%% HTTP/1.1 keep-alive. Written for the side-by-side with examples/http_server.lua.
%% (Kept beside ../../../examples/http_server.lua for compare.lua's http rows: the same
%% page and the same keep-alive rules.)
%% usage: ERL_FLAGS="+S 2" escript httpd.escript PORT [ACCEPTORS]   (PORT 0: any free port)
-mode(compile).

main([PortS]) -> main([PortS, "16"]);
main([PortS, AccS]) ->
    {ok, L} = gen_tcp:listen(list_to_integer(PortS),
                             [binary, {active, false}, {reuseaddr, true},
                              {backlog, 1024}, {nodelay, true}, {ip, {127,0,0,1}}]),
    [spawn(fun() -> accept(L) end) || _ <- lists:seq(1, list_to_integer(AccS))],
    {ok, Port} = inet:port(L),          % PORT 0: the system chose one
    io:format("listening on ~w~n", [Port]),
    receive stop -> ok end.

accept(L) ->
    {ok, S} = gen_tcp:accept(L),
    P = spawn(fun() -> receive go -> conn(S, <<>>) end end),
    ok = gen_tcp:controlling_process(S, P),
    P ! go,
    accept(L).

conn(S, Buf) ->
    case binary:match(Buf, <<"\r\n\r\n">>) of
        nomatch ->
            case gen_tcp:recv(S, 0, 30000) of
                {ok, D} -> conn(S, <<Buf/binary, D/binary>>);
                _ -> gen_tcp:close(S)
            end;
        {Pos, 4} ->
            <<Head:Pos/binary, _:4/binary, Rest/binary>> = Buf,
            [Line | _] = binary:split(Head, <<"\r\n">>),
            Keep = binary:match(Head, [<<"Connection: close">>, <<"connection: close">>]) =:= nomatch,
            Body = case Line of
                       <<"GET / ", _/binary>> -> page();
                       <<"GET /index.html ", _/binary>> -> page();
                       _ -> <<"<html><body>404 Not Found</body></html>\n">>
                   end,
            Len = iolist_size(Body),
            Hdr = ["HTTP/1.1 200 OK\r\nServer: beam\r\nContent-Type: text/html\r\nContent-Length: ",
                   integer_to_binary(Len), "\r\n",
                   case Keep of true -> ""; false -> "Connection: close\r\n" end, "\r\n"],
            case gen_tcp:send(S, [Hdr, Body]) of
                ok when Keep -> conn(S, Rest);
                _ -> gen_tcp:close(S)
            end
    end.

page() ->
    ["<html><head><title>beam</title></head><body>\n",
     [[integer_to_binary(I), <<"<br>\n">>] || I <- lists:seq(1, 5000)],
     "</body></html>\n"].
