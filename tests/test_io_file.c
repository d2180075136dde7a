/*
** test_io_file.c -- file ports (private thread: open, write, seek, read, errors) and
** fd ports (descriptors the VM already has: lines in, bytes out, flags restored).
*/
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "test_io.h"

static void tmp_path(char *buf, size_t cap) {
  snprintf(buf, cap, "/tmp/lpvm_test_io_file_%d", (int)getpid());
}

static void expect_data(const char *s, long ms) {
  pmsg m;
  next_pmsg(&m, "data", ms);
  cr_assert(m.len == strlen(s) && memcmp(m.bin, s, m.len) == 0, "got '%.*s', expected '%s'",
            (int)m.len, (const char *)m.bin, s);
  pmsg_free(&m);
}

Test(io_file, write_seek_read) {
  int fds = fd_count();
  char path[64];
  tmp_path(path, sizeof path);
  vm_start_n(2, 1);
  lpvm_id c = coll_spawn();
  lpvm_id f;
  cr_assert_eq(lpvm_file_open(NULL, path, "w+", c, &f), 0);
  cr_assert(lpvm_id_is_port(f));
  cr_assert_eq(lpvm_file_write(NULL, f, "hello, file", 11), 0);
  expect_pmsg("ok", 5000);
  cr_assert_eq(lpvm_file_seek(NULL, f, 7, SEEK_SET), 0);
  pmsg m;
  next_pmsg(&m, "position", 5000);
  cr_assert_eq(m.num, 7);
  pmsg_free(&m);
  cr_assert_eq(lpvm_file_read(NULL, f, 100), 0);
  expect_data("file", 5000);
  cr_assert_eq(lpvm_file_read(NULL, f, 10), 0);
  expect_pmsg("eof", 5000);
  cr_assert_eq(lpvm_file_seek(NULL, f, -4, SEEK_END), 0);
  next_pmsg(&m, "position", 5000);
  cr_assert_eq(m.num, 7);
  pmsg_free(&m);
  cr_assert_eq(lpvm_file_seek(NULL, f, -100, SEEK_SET), 0);
  next_pmsg(&m, "error", 5000);
  cr_assert_str_eq(m.atom, "einval");
  pmsg_free(&m);
  cr_assert_eq(lpvm_port_close(NULL, f), 0);
  expect_pmsg("closed", 5000);
  /* append, then read it all back through a new port */
  cr_assert_eq(lpvm_file_open(NULL, path, "a", c, &f), 0);
  cr_assert_eq(lpvm_file_write(NULL, f, "!", 1), 0);
  expect_pmsg("ok", 5000);
  cr_assert_eq(lpvm_file_read(NULL, f, 1), 0);  /* write-only: an error, not a crash */
  next_pmsg(&m, "error", 5000);
  cr_assert_str_eq(m.atom, "ebadf");
  pmsg_free(&m);
  cr_assert_eq(lpvm_port_close(NULL, f), 0);
  expect_pmsg("closed", 5000);
  cr_assert_eq(lpvm_file_open(NULL, path, "r", c, &f), 0);
  cr_assert_eq(lpvm_file_read(NULL, f, 64), 0);
  expect_data("hello, file!", 5000);
  vm_stop();  /* the port is killed with the VM: its descriptor is closed */
  unlink(path);
  cr_assert_eq(fd_count(), fds, "descriptor leak");
}

Test(io_file, open_errors_and_owner_death) {
  int fds = fd_count();
  vm_start_n(1, 1);
  lpvm_id c = coll_spawn();
  lpvm_id f;
  errno = 0;
  cr_assert_eq(lpvm_file_open(NULL, "/nonexistent/dir/x", "r", c, &f), LPVM_ESYS);
  cr_assert_eq(errno, ENOENT);
  cr_assert_eq(lpvm_file_open(NULL, "/tmp", "q", c, &f), LPVM_EINVAL);
  cr_assert_eq(lpvm_file_open(NULL, "/tmp/x", "r", 0, &f), LPVM_EINVAL, "no owner");
  lpvm_id owner = relay_spawn(c);
  cr_assert_eq(lpvm_file_open(NULL, "/dev/null", "r", owner, &f), 0);
  lpvm_kill(NULL, owner);
  lpvm_kill(NULL, c);
  cr_assert(wait_no_tasks(5000), "the file port closed with its owner");
  vm_stop();
  cr_assert_eq(fd_count(), fds, "descriptor leak");
}

Test(io_fd, lines_in_bytes_out_flags_restored) {
  int fds = fd_count();
  int in[2], out[2];
  cr_assert_eq(pipe(in), 0);
  cr_assert_eq(pipe(out), 0);
  vm_start_n(2, 1);
  lpvm_id c = coll_spawn();
  lpvm_port_opts po = popts(c, LPVM_ACTIVE_TRUE, LPVM_PACKET_LINE);
  lpvm_id p;
  cr_assert_eq(lpvm_port_fd(NULL, in[0], out[1], &po, &p), 0);
  cr_assert(fcntl(in[0], F_GETFL) & O_NONBLOCK, "non-blocking while open");
  cr_assert_eq(write(in[1], "first line\nsecond", 17), 17);
  expect_data("first line\n", 5000);
  cr_assert_eq(write(in[1], " line\n", 6), 6);
  expect_data("second line\n", 5000);
  cr_assert_eq(lpvm_port_send(NULL, p, "to stdout", 9), 0);
  char buf[16];
  cr_assert_eq(read(out[0], buf, sizeof buf), 9);
  cr_assert(memcmp(buf, "to stdout", 9) == 0);
  close(in[1]);
  expect_pmsg("eof", 5000);
  cr_assert_eq(lpvm_port_close(NULL, p), 0);
  expect_pmsg("closed", 5000);
  cr_assert_eq(fcntl(in[0], F_GETFL) & O_NONBLOCK, 0, "flags restored");
  cr_assert_eq(fcntl(out[1], F_GETFL) & O_NONBLOCK, 0, "flags restored");
  cr_assert_eq(fcntl(in[0], F_GETFD) >= 0, 1, "the original stays open");
  close(in[0]), close(out[0]), close(out[1]);
  vm_stop();
  cr_assert_eq(fd_count(), fds, "descriptor leak");
}

Test(io_fd, regular_file_reads_as_always_ready) {
  char path[64];
  tmp_path(path, sizeof path);
  FILE *fp = fopen(path, "w");
  fputs("a\nb\n", fp);
  fclose(fp);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  vm_start_n(2, 1);
  lpvm_id c = coll_spawn();
  lpvm_port_opts po = popts(c, LPVM_ACTIVE_TRUE, LPVM_PACKET_LINE);
  cr_assert_eq(lpvm_port_fd(NULL, fd, -1, &po, NULL), 0);
  expect_data("a\n", 5000);
  expect_data("b\n", 5000);
  expect_pmsg("eof", 5000);
  cr_assert_eq(lpvm_port_fd(NULL, -1, -1, &po, NULL), LPVM_EINVAL);
  errno = 0;
  cr_assert_eq(lpvm_port_fd(NULL, 12345, -1, &po, NULL), LPVM_ESYS, "not open");
  cr_assert_eq(errno, EBADF);
  cr_assert_eq(lpvm_port_fd(NULL, fd, 12345, &po, NULL), LPVM_ESYS, "the out side not open");
  vm_stop();
  close(fd);
  unlink(path);
}

/* Every command checks the port's kind: a file command to a stream or a listener, a
** stream command to a file or a listener, an accept to anything but a listener is
** LPVM_EINVAL at once (before, it was queued and the caller waited for ever). */
Test(io_kinds, commands_check_the_port_kind) {
  int fds = fd_count();
  char path[64];
  tmp_path(path, sizeof path);
  int pp[2];
  cr_assert_eq(pipe(pp), 0);
  vm_start_n(2, 1);
  lpvm_id c = coll_spawn();
  lpvm_port_opts po = popts(c, LPVM_ACTIVE_FALSE, LPVM_PACKET_RAW);
  lpvm_id f, fd, l;
  cr_assert_eq(lpvm_file_open(NULL, path, "w+", c, &f), 0);
  cr_assert_eq(lpvm_port_fd(NULL, pp[0], -1, &po, &fd), 0);
  cr_assert_eq(lpvm_tcp_listen(NULL, "127.0.0.1", 0, NULL, &po, &l, NULL), 0);
  cr_assert_str_eq(lpvm_port_kind(f), "file");
  cr_assert_str_eq(lpvm_port_kind(fd), "fd");
  cr_assert_str_eq(lpvm_port_kind(l), "tcp_listen");
  cr_assert_null(lpvm_port_kind(c), "a process is no port");
  lpvm_id streams[] = {fd, l};
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(lpvm_file_read(NULL, streams[i], 1), LPVM_EINVAL);
    cr_assert_eq(lpvm_file_write(NULL, streams[i], "x", 1), LPVM_EINVAL);
    cr_assert_eq(lpvm_file_seek(NULL, streams[i], 0, SEEK_SET), LPVM_EINVAL);
  }
  lpvm_id nonstreams[] = {f, l};
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(lpvm_port_recv(NULL, nonstreams[i], 0), LPVM_EINVAL);
    cr_assert_eq(lpvm_port_set_active(NULL, nonstreams[i], LPVM_ACTIVE_TRUE), LPVM_EINVAL);
    cr_assert_eq(lpvm_port_set_packet(NULL, nonstreams[i], 1), LPVM_EINVAL);
    cr_assert_eq(lpvm_port_shutdown(NULL, nonstreams[i]), LPVM_EINVAL);
    cr_assert_eq(lpvm_port_send(NULL, nonstreams[i], "x", 1), LPVM_EINVAL);
  }
  cr_assert_eq(lpvm_tcp_accept(NULL, f, c), LPVM_EINVAL);
  cr_assert_eq(lpvm_tcp_accept(NULL, fd, c), LPVM_EINVAL);
  cr_assert_eq(lpvm_port_controlling_process(NULL, f, c), LPVM_EINVAL);
  /* the right kinds still work */
  cr_assert_eq(lpvm_file_write(NULL, f, "x", 1), 0);
  expect_pmsg("ok", 5000);
  cr_assert_eq(lpvm_port_controlling_process(NULL, l, c), 0);
  cr_assert_eq(lpvm_port_close(NULL, f), 0);
  expect_pmsg("closed", 5000);
  cr_assert_neq(lpvm_file_read(NULL, f, 1), LPVM_EINVAL, "an ended port is no wrong kind");
  vm_stop();
  close(pp[0]), close(pp[1]);
  unlink(path);
  cr_assert_eq(fd_count(), fds, "descriptor leak");
}
