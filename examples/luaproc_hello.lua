-- luaproc_hello.lua -- Listing 1 of the luaproc paper (Skyrme, Rodriguez and
-- Ierusalimschy, "Exploring Lua for Concurrent Programming", 2008), a luaproc
-- program run unchanged by lpvm:
--
--   build/lpvm examples/luaproc_hello.lua
--   LUA_CPATH='build/vm/?.so;;' lua5.4 examples/luaproc_hello.lua
--
-- One change to the listing as printed: its outer code string used the same long
-- bracket level ([=[ ... ]=]) as the strings nested inside it, which no Lua can
-- parse; the outer one is [==[ ... ]==] here. createworker() and exit() are the
-- paper's API; today's luaproc calls them setnumworkers() and wait(). Both work.

-- load our concurrent programming library
require "luaproc"

-- create an additional worker
luaproc.createworker()

-- create a new lua process
luaproc.newproc( [==[
  -- create a new channel
  luaproc.newchannel( "achannel" )
  -- create a new lua process
  luaproc.newproc( [=[
    -- send a message to the channel
    luaproc.send( "achannel", "hello world" )
  ]=] )
  -- create a new lua process
  luaproc.newproc( [=[
    -- receive a message from the channel
    msg = luaproc.receive( "achannel" )
    -- print the received message
    print( msg )
  ]=] )
]==] )

-- wait until all lua processes
-- have finished before exiting
luaproc.exit()
