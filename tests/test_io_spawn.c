/*
** test_io_spawn.c -- spawn ports: round trips through cat, exit statuses, the owner's
** death killing and reaping the child, stderr, env and cwd; no descriptor leaks.
*/
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "test_io.h"

static lpvm_id spawn_argv(lpvm_id owner, const char *const *argv, int err_mode) {
  lpvm_spawn_port_opts so = {argv, NULL, NULL, err_mode};
  lpvm_port_opts po = popts(owner, LPVM_ACTIVE_TRUE, LPVM_PACKET_RAW);
  lpvm_id p;
  cr_assert_eq(lpvm_port_spawn(NULL, &so, &po, &p), 0);
  cr_assert(lpvm_id_is_port(p));
  return p;
}

/* Wait for {data} messages until `want` bytes came; they must equal `expect`. */
static void expect_bytes(const char *expect, size_t want) {
  size_t got = 0;
  while (got < want) {
    pmsg p;
    next_pmsg(&p, "data", 5000);
    cr_assert(got + p.len <= want, "too much data");
    cr_assert(memcmp(p.bin, expect + got, p.len) == 0, "wrong bytes");
    got += p.len;
    pmsg_free(&p);
  }
}

Test(io_spawn, cat_round_trips) {
  int fds = fd_count();
  vm_start_n(2, 1);
  lpvm_id c = coll_spawn();
  static const char *const cat[] = {"cat", NULL};
  lpvm_id p = spawn_argv(c, cat, LPVM_STDERR_INHERIT);
  size_t n = test_scaled(10000, 300);
  char buf[256];
  for (size_t i = 0; i < n; i++) {
    size_t len = (size_t)snprintf(buf, sizeof buf, "%zu:%s", i, i % 2 ? "x" : "hello, cat");
    cr_assert_eq(lpvm_port_send(NULL, p, buf, len), 0);
    expect_bytes(buf, len);
  }
  cr_assert_eq(lpvm_port_shutdown(NULL, p), 0);  /* cat sees EOF and exits 0 */
  expect_pmsg("eof", 5000);
  pmsg m;
  next_pmsg(&m, "exit_status", 5000);
  cr_assert_eq(m.num, 0);
  pmsg_free(&m);
  expect_pmsg("closed", 5000);
  lpvm_kill(NULL, c);
  vm_stop();
  cr_assert_eq(fd_count(), fds, "descriptor leak");
}

Test(io_spawn, exit_status_of_failing_program) {
  int fds = fd_count();
  vm_start_n(2, 1);
  lpvm_id c = coll_spawn();
  static const char *const sh[] = {"sh", "-c", "echo bye; exit 3", NULL};
  spawn_argv(c, sh, LPVM_STDERR_INHERIT);
  expect_bytes("bye\n", 4);
  expect_pmsg("eof", 5000);
  pmsg m;
  next_pmsg(&m, "exit_status", 5000);
  cr_assert_eq(m.num, 3);
  pmsg_free(&m);
  expect_pmsg("closed", 5000);
  static const char *const killed[] = {"sh", "-c", "kill -9 $$", NULL};
  spawn_argv(c, killed, LPVM_STDERR_INHERIT);
  expect_pmsg("eof", 5000);
  next_pmsg(&m, "exit_status", 5000);
  cr_assert_eq(m.num, 128 + 9);
  pmsg_free(&m);
  expect_pmsg("closed", 5000);
  vm_stop();
  cr_assert_eq(fd_count(), fds, "descriptor leak");
}

static pid_t read_pid(void) {
  pmsg m;
  next_pmsg(&m, "data", 5000);
  char buf[32] = {0};
  memcpy(buf, m.bin, m.len < 31 ? m.len : 31);
  pmsg_free(&m);
  pid_t pid = (pid_t)atoi(buf);
  cr_assert(pid > 1);
  return pid;
}

Test(io_spawn, owner_death_kills_and_reaps_child) {
  int fds = fd_count();
  vm_start_n(2, 1);
  lpvm_id c = coll_spawn();
  lpvm_id owner = relay_spawn(c);
  static const char *const sh[] = {"sh", "-c", "echo $$; exec sleep 100", NULL};
  spawn_argv(owner, sh, LPVM_STDERR_INHERIT);
  pid_t pid = read_pid();
  cr_assert_eq(kill(pid, 0), 0, "child runs");
  cr_assert_eq(lpvm_exit_atom(NULL, owner, "shutdown"), 0);
  cr_assert(reaped_within(pid, 5000), "child %d still there (or a zombie)", (int)pid);
  lpvm_kill(NULL, c);
  cr_assert(wait_no_tasks(5000), "the port is gone too");
  vm_stop();
  cr_assert_eq(fd_count(), fds, "descriptor leak");
}

Test(io_spawn, normal_owner_exit_closes_port_too) {
  vm_start_n(2, 1);
  lpvm_id c = coll_spawn();
  lpvm_id owner = relay_spawn(c);
  static const char *const sh[] = {"sh", "-c", "echo $$; exec sleep 100", NULL};
  spawn_argv(owner, sh, LPVM_STDERR_INHERIT);
  pid_t pid = read_pid();
  cr_assert_eq(lpvm_send_msg(NULL, owner, atom_msg("stop")), 0);  /* exits normally */
  cr_assert(reaped_within(pid, 5000));
  vm_stop();
}

Test(io_spawn, close_kills_child_and_says_closed) {
  int fds = fd_count();
  vm_start_n(2, 1);
  lpvm_id c = coll_spawn();
  static const char *const sh[] = {"sh", "-c", "echo $$; exec sleep 100", NULL};
  lpvm_id p = spawn_argv(c, sh, LPVM_STDERR_INHERIT);
  pid_t pid = read_pid();
  cr_assert_eq(lpvm_port_close(NULL, p), 0);
  expect_pmsg("closed", 5000);
  cr_assert(reaped_within(pid, 5000));
  cr_assert_eq(lpvm_port_send(NULL, p, "x", 1), LPVM_ENOPROC);
  vm_stop();
  cr_assert_eq(fd_count(), fds, "descriptor leak");
}

Test(io_spawn, killed_port_reaps_child_and_tells_linked_owner) {
  vm_start_n(2, 1);
  lpvm_id c = coll_spawn();
  lpvm_id owner = relay_spawn(c);
  static const char *const sh[] = {"sh", "-c", "echo $$; exec sleep 100", NULL};
  lpvm_id p = spawn_argv(owner, sh, LPVM_STDERR_INHERIT);
  pid_t pid = read_pid();
  lpvm_kill(NULL, p);  /* abnormal: the owner (linked, not trapping) dies too */
  cr_assert(reaped_within(pid, 5000));
  for (int i = 0; i < 5000 && lpvm_task_count() > 1; i++) sleep_ms(1);
  cr_assert_eq(lpvm_task_count(), 1, "owner died with its port");
  vm_stop();
}

Test(io_spawn, missing_program_is_enoent) {
  int fds = fd_count();
  vm_start_n(1, 1);
  lpvm_id c = coll_spawn();
  static const char *const nope[] = {"/nonexistent/lpvm-no-such-program", NULL};
  lpvm_spawn_port_opts so = {nope, NULL, NULL, 0};
  lpvm_port_opts po = popts(c, 1, 0);
  lpvm_id p;
  errno = 0;
  cr_assert_eq(lpvm_port_spawn(NULL, &so, &po, &p), LPVM_ESYS);
  cr_assert_eq(errno, ENOENT);
  cr_assert_str_eq(lpvm_errno_atom(errno), "enoent");
  so.argv = NULL;
  cr_assert_eq(lpvm_port_spawn(NULL, &so, &po, &p), LPVM_EINVAL);
  vm_stop();
  cr_assert_eq(fd_count(), fds, "descriptor leak");
}

Test(io_spawn, stderr_env_and_cwd) {
  vm_start_n(2, 1);
  lpvm_id c = coll_spawn();
  static const char *const sh[] = {"sh", "-c", "echo oops >&2; echo \"$FOO\"; pwd", NULL};
  static const char *const env[] = {"FOO=bar", "PATH=/usr/bin:/bin", NULL};
  lpvm_spawn_port_opts so = {sh, env, "/", LPVM_STDERR_PIPE};
  lpvm_port_opts po = popts(c, LPVM_ACTIVE_TRUE, LPVM_PACKET_LINE);
  cr_assert_eq(lpvm_port_spawn(NULL, &so, &po, NULL), 0);
  int got_err = 0, got_foo = 0, got_cwd = 0, done = 0;
  while (!done) {
    pmsg m;
    next_pmsg(&m, NULL, 5000);
    if (!strcmp(m.tag, "stderr")) got_err = m.len == 5 && !memcmp(m.bin, "oops\n", 5);
    else if (!strcmp(m.tag, "data") && m.len == 4 && !memcmp(m.bin, "bar\n", 4)) got_foo = 1;
    else if (!strcmp(m.tag, "data") && m.len == 2 && !memcmp(m.bin, "/\n", 2)) got_cwd = 1;
    else if (!strcmp(m.tag, "closed")) done = 1;
    pmsg_free(&m);
  }
  cr_assert(got_err && got_foo && got_cwd, "stderr %d env %d cwd %d", got_err, got_foo, got_cwd);
  vm_stop();
}

Test(io_spawn, sigpipe_is_default_again_in_the_child) {
  vm_start_n(2, 1);
  lpvm_id c = coll_spawn();
  /* yes dies of SIGPIPE when head is done, unless SIGPIPE stayed ignored */
  static const char *const sh[] = {"sh", "-c", "yes | head -n 1 >/dev/null; echo ok", NULL};
  spawn_argv(c, sh, LPVM_STDERR_INHERIT);
  expect_bytes("ok\n", 3);
  vm_stop();
}
