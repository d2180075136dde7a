-- bench_echo.lua -- the gen_server of bench_otp.lua gs_call: replies with the request.
return {
  init = function() return "ok", 0 end,
  handle_call = function(req, _, s) return "reply", req, s end,
}
