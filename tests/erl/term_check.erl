%% term_check.erl -- the Erlang half of tests/erl/term_check.sh.
%%
%% main([TermDump, Dir]):
%%   1. runs `TermDump encode` and decodes every lpvm term with binary_to_term/1; each
%%      must equal the term expected under its name (and, where lpvm writes exactly
%%      what erl writes, term_to_binary must give back the same bytes);
%%   2. writes Dir/dec.in: term_to_binary of a list of terms in three encodings
%%      (this release's default, minor_version 0 and 2), runs
%%      `TermDump decode < dec.in > dec.out` and checks lpvm's rendering of each
%%      against erl's own (io_lib:print) and lpvm's re-encoding against the term.
%% Prints a FAIL line per mismatch and "N passed, M failed"; halts 1 on a failure.
-module(term_check).
-export([main/1]).

main([Dump, Dir]) ->
    Results = check_encoded(Dump) ++ check_decoded(Dump, Dir),
    Failed = [R || R <- Results, R =/= ok],
    [io:format("FAIL ~ts~n", [F]) || F <- Failed],
    io:format("~b passed, ~b failed~n", [length(Results) - length(Failed), length(Failed)]),
    halt(case Failed of [] -> 0; _ -> 1 end).

%% ---- lpvm -> erl ---------------------------------------------------------------------

%% {Name, Expect}: {exact, T}: decodes to T and erl encodes T to the same bytes;
%% {equal, T}: decodes to T (erl picks another encoding); {shows, S, exact | equal}:
%% decodes to a term erl prints as S; badarg: erl refuses it.
encoded_expectations() ->
    [{atom_abc, {exact, abc}},
     {atom_empty, {exact, ''}},
     {atom_quote, {exact, 'it\'s'}},
     {atom_utf8, {exact, list_to_atom([233, $t, 233])}},
     {atom_255, {exact, list_to_atom(lists:duplicate(255, $x))}},
     {atom_long_utf8, {exact, list_to_atom(lists:duplicate(200, 233))}},
     {ints, {exact, [0, 255, 256, -1, -2147483648, 2147483647, 2147483648, -2147483649,
                     -9223372036854775808, 9223372036854775807, 1 bsl 40, -(1 bsl 40),
                     -9223372036854775807]}},
     {int64_min, {exact, -9223372036854775808}},
     {int_2_31, {exact, 2147483648}},
     {floats, {exact, {0.0, -0.0, 1.5, 1.0e300, 0.1, 5.0e-324, -2.5e-10,
                       1.7976931348623157e308}}},
     {float_nan, badarg},
     {float_inf, badarg},
     {bin_empty, {exact, <<>>}},
     {bin_hi, {exact, <<"hi">>}},
     {bin_100k, {exact, << <<((I * 7) band 255)>> || I <- lists:seq(0, 99999) >>}},
     {tuple_0, {exact, {}}},
     {tuple_300, {exact, list_to_tuple(lists:seq(1, 300))}},
     {nil, {exact, []}},
     {list_ab, {exact, [a, b]}},
     {list_improper, {exact, [a | b]}},
     {list_123, {equal, [1, 2, 3]}},
     {map_0, {exact, #{}}},
     {map_ab, {exact, #{a => 1, b => 2}}},
     {map_patched, {equal, #{<<"k">> => {}, 7 => [1.5], z => #{}}}},
     {pid, {shows, "<0.5.1>", exact}},
     {pid_max, {shows, "<0.4294967295.1073741823>", exact}},
     {port, {shows, "#Port<0.12884901895>", exact}},
     {port_small, {shows, "#Port<0.9>", equal}},
     {ref, {shows, "#Ref<0.0.19088743.2309737967>", exact}},
     {ref_max, {shows, "#Ref<0.0.4294967295.4294967295>", exact}},
     {nested, {exact, {ok, [{a, <<"x">>}, -7], #{k => [1.5]}}}},
     {exit_msg, {shows, "{'EXIT',<0.17.2>,{badarg,[]}}", exact}}].

check_encoded(Dump) ->
    Lines = string:split(os:cmd(quote(Dump) ++ " encode"), "\n", all),
    Got = maps:from_list([begin [N, H] = string:split(L, " "), {list_to_atom(N), unhex(H)} end
                          || L <- Lines, L =/= ""]),
    Expect = encoded_expectations(),
    Missing = [io_lib:format("encode ~p: term_dump wrote no such term", [N])
               || {N, _} <- Expect, not maps:is_key(N, Got)],
    Extra = [io_lib:format("encode ~p: no expectation for it", [N])
             || N <- maps:keys(Got), not lists:keymember(N, 1, Expect)],
    Missing ++ Extra ++ [check_one(N, maps:get(N, Got), E) || {N, E} <- Expect, maps:is_key(N, Got)].

check_one(Name, Bin, badarg) ->
    case catch binary_to_term(Bin) of
        {'EXIT', {badarg, _}} -> ok;
        Other -> io_lib:format("encode ~p: erl accepted ~w", [Name, Other])
    end;
check_one(Name, Bin, Expect) ->
    case catch binary_to_term(Bin) of
        {'EXIT', Why} -> io_lib:format("encode ~p: binary_to_term failed: ~P", [Name, Why, 8]);
        T -> check_value(Name, Bin, T, Expect)
    end.

check_value(Name, Bin, T, {exact, T}) -> same_bytes(Name, Bin, T);
check_value(_, _, T, {equal, T}) -> ok;
check_value(Name, Bin, T, {shows, S, How}) ->
    case show(T) of
        S when How =:= exact -> same_bytes(Name, Bin, T);
        S -> ok;
        Other -> io_lib:format("encode ~p: erl shows ~ts, expected ~ts", [Name, Other, S])
    end;
check_value(Name, _, T, {_, Want}) ->
    io_lib:format("encode ~p: got ~P, expected ~P", [Name, T, 20, Want, 20]).

same_bytes(Name, Bin, T) ->
    case term_to_binary(T, [{minor_version, 2}]) of
        Bin -> ok;
        Other -> io_lib:format("encode ~p: erl writes ~w, lpvm wrote ~w", [Name, Other, Bin])
    end.

%% ---- erl -> lpvm ---------------------------------------------------------------------

%% {Name, Term | {raw, Bytes}, Flags}. Flags: notrans (lpvm has no value for it, so no
%% re-encoding), lossy (lpvm keeps only part of it: the low 64 bits of an erl
%% reference), {shows, S} (lpvm's rendering where it differs from erl's on purpose),
%% {encodings, L}.
decode_cases() ->
    Self = self(),
    Foreign = binary_to_term(<<131, 88, 119, 7, "foo@bar", 5:32, 1:32, 1:32>>),
    Closure = fun(X) -> X + 1 end,
    NA = <<100, 0, 13, "nonode@nohost">>,
    [{atoms, [abc, 'Ok', 'it\'s', '', 'a\nb', 'hello world', a@b_C1, 'end', 'a\x01b', '\x7f',
              'with"quote'], []},
     {atom_latin1, list_to_atom([233]), [{shows, "'\x{e9}'"}, {encodings, [minor_version_2]}]},
     {atom_latin1_old, list_to_atom([233]),
      [{shows, "'\x{e9}'"}, notrans, {encodings, [default]}]},
     {small_ints, [0, 1, 255, 256, -1, -256], []},
     {int_edges, [-2147483648, 2147483647, 2147483648, -2147483649, -9223372036854775808,
                  9223372036854775807], []},
     {big_2_64, 1 bsl 64, [notrans]},
     {big_m2_64, -(1 bsl 64), [notrans]},
     {big_m2_100, -(1 bsl 100), [notrans]},
     {big_2_2048, (1 bsl 2048) - 1, [notrans]},
     {floats, {0.0, -0.0, 1.0, 100.0, 1000.0, 123456.0, 0.1, 0.0001, 1.0e-5, 1.0e300,
               5.0e-324, 9007199254740992.0, 1234567890123456.0, -2.5, 1.23e-4, 3.14159,
               1 / 3, 1.7976931348623157e308, 2.2250738585072014e-308}, []},
     {random_floats, random_floats(300), []},
     {bin_empty, <<>>, []},
     {bin_hi, <<"hi">>, []},
     {bin_bytes, <<1, 2, 255>>, []},
     {bin_escapes, <<"say \"hi\"\n\e\v\b\f\\">>, []},
     {bin_10k, << <<((I * 13) band 255)>> || I <- lists:seq(1, 10000) >>, []},
     {strings, ["abc", [1, 2, 3], "a'b", "tab\there", lists:seq(1, 300)], []},
     {tuples, {{}, {a, 1}, list_to_tuple(lists:seq(1, 300))}, []},
     {lists, [[], [a, b], [a | b], [[1], [2, [3]]], [1.5 | 2]], []},
     {maps, {#{}, #{a => 1, b => [1.5], <<"k">> => {}}, #{m => #{n => #{}}}}, []},
     {erl_pids, [Self, list_to_pid("<0.5.1>")], []},
     {foreign_pid, Foreign, [{shows, "<foo@bar.5.1>"}]},
     {erl_refs, [make_ref(), list_to_ref("#Ref<0.1.2.3>")], [lossy]},
     {erl_port, hd(erlang:ports()), []},
     {export_fun, fun lists:map/2, [notrans]},
     {closure, Closure, [notrans, {shows, "#Fun<>"}]},
     {compressed, {raw, term_to_binary(lists:duplicate(30, a), [compressed])},
      [notrans, {shows, "<bad>"}]},
     {bitstrings, [<<1:1>>, <<"abc", 1:2>>, <<1, 2, 0:7>>, <<32, 7:3>>], [notrans]},
     {old_ref1, {raw, <<131, 101, NA/binary, 16#3abcd:32, 1>>}, [lossy]},
     {old_pid, {raw, <<131, 103, NA/binary, 5:32, 1:32, 1>>}, []},
     {old_port, {raw, <<131, 102, NA/binary, 9:32, 1>>}, []},
     {old_ref, {raw, <<131, 114, 3:16, NA/binary, 1, 16#3abcd:32, 16#01234567:32, 0:32>>}, []},
     {small_atom, {raw, <<131, 115, 3, "abc">>}, []},
     {everything, {ok, Self, [make_ref(), #{k => <<"v">>}], 1.5e-7, "str", [1 | 2]}, [lossy]}].

random_floats(N) ->
    rand:seed(exsss, {1, 2, 3}),
    list_to_tuple([(rand:uniform() - 0.5) * math:pow(10, rand:uniform(600) - 300)
                   || _ <- lists:seq(1, N)]).

encodings(Flags) ->
    proplists:get_value(encodings, Flags, [default, minor_version_0, minor_version_2]).

encode(_, {raw, Bin}) -> Bin;
encode(default, T) -> term_to_binary(T);
encode(minor_version_0, T) -> term_to_binary(T, [{minor_version, 0}]);
encode(minor_version_2, T) -> term_to_binary(T, [{minor_version, 2}]).

check_decoded(Dump, Dir) ->
    Cases = [{lists:concat([Name, "/", Enc]), T, Flags}
             || {Name, T, Flags} <- decode_cases(),
                Enc <- case T of {raw, _} -> [raw]; _ -> encodings(Flags) end],
    In = filename:join(Dir, "dec.in"),
    Out = filename:join(Dir, "dec.out"),
    ok = file:write_file(In, [[N, " ", hex(encode(enc_of(N), T)), "\n"] || {N, T, _} <- Cases]),
    _ = os:cmd(quote(Dump) ++ " decode < " ++ quote(In) ++ " > " ++ quote(Out)),
    {ok, Text} = file:read_file(Out),
    Rows = [binary:split(L, <<"\t">>, [global]) || L <- binary:split(Text, <<"\n">>, [global]),
                                                   L =/= <<>>],
    Got = maps:from_list([{binary_to_list(N), {R, H}} || [N, R, H] <- Rows]),
    lists:append([check_row(N, T, Flags, maps:get(N, Got, missing)) || {N, T, Flags} <- Cases]).

enc_of(Name) ->
    [_, Enc] = string:split(Name, "/"),
    list_to_atom(Enc).

check_row(Name, _, _, missing) ->
    [io_lib:format("decode ~s: term_dump printed nothing", [Name])];
check_row(Name, T0, Flags, {Rendered, Hex}) ->
    T = case T0 of {raw, B} -> binary_to_term(B); _ -> T0 end,
    Want = unicode:characters_to_binary(proplists:get_value(shows, Flags, show(T))),
    R = case Rendered of
            Want -> ok;
            _ -> io_lib:format("decode ~s: lpvm shows ~ts, erl ~ts", [Name, Rendered, Want])
        end,
    case lists:member(lossy, Flags) of
        true -> [R];
        false -> [R, check_trans(Name, T, lists:member(notrans, Flags), Hex)]
    end.

%% lpvm's re-encoding must decode to the same term; ids come back with lpvm's
%% creation, so for them the printed forms are compared.
check_trans(_, _, true, <<"-">>) -> ok;
check_trans(Name, _, true, _) ->
    io_lib:format("decode ~s: lpvm re-encoded a term it has no value for", [Name]);
check_trans(Name, _, false, <<"-">>) ->
    io_lib:format("decode ~s: lpvm could not re-encode it", [Name]);
check_trans(Name, T, false, Hex) ->
    case catch binary_to_term(unhex(binary_to_list(Hex))) of
        T -> ok;
        T2 -> case has_ids(T) andalso show(T2) =:= show(T) of
                  true -> ok;
                  false -> io_lib:format("decode ~s: lpvm re-encoded it as ~P", [Name, T2, 20])
              end
    end.

has_ids(T) when is_pid(T); is_port(T); is_reference(T) -> true;
has_ids(T) when is_list(T) -> lists:any(fun has_ids/1, improper_to_list(T));
has_ids(T) when is_tuple(T) -> has_ids(tuple_to_list(T));
has_ids(T) when is_map(T) -> has_ids(maps:to_list(T));
has_ids(_) -> false.

improper_to_list([H | T]) -> [H | improper_to_list(T)];
improper_to_list([]) -> [];
improper_to_list(X) -> [X].

%% ---- helpers ---------------------------------------------------------------------------

show(T) -> lists:flatten(io_lib:print(T, 1, 100000000, -1)).

hex(Bin) -> binary:encode_hex(Bin).

unhex(Hex) -> <<<<(list_to_integer([H, L], 16))>> || <<H, L>> <= list_to_binary(Hex)>>.

quote(Path) -> "'" ++ Path ++ "'".
