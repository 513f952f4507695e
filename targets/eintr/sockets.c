/* eintr-sockets: threads blocked in calls a ptrace stop ends with EINTR that targets/eintr does not
 * cover: recv and accept on sockets with SO_RCVTIMEO, and io_uring_enter waiting for events; built
 * with -O0 (frame pointers: their stacks need rbp, which only a stop gives). Each prints
 * "CALL: EINTR" on every EINTR it gets. (From a review of issue 35: a stack and a profile made
 * these print 197 EINTRs in 2 s before sampler left such threads alone.) */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <netinet/in.h>
#include <linux/io_uring.h>
#include <sys/time.h>

static void say(const char *s) { write(1, s, strlen(s)); }

__attribute__((noinline)) void recv_wait(int fd) {
  char buf[16];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) say("recv: EINTR\n");
    else if (n < 0 && errno == EAGAIN) say("recv: timeout\n");
    else if (n < 0) say("recv: other error\n");
  }
}
static void *recv_thread(void *a) {
  int sv[2]; socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  struct timeval tv = {100, 0};
  setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  recv_wait(sv[0]); return 0;
}
__attribute__((noinline)) void accept_wait(int fd) {
  for (;;) {
    int c = accept(fd, 0, 0);
    if (c < 0 && errno == EINTR) say("accept: EINTR\n");
    else if (c < 0 && errno == EAGAIN) say("accept: timeout\n");
  }
}
static void *accept_thread(void *a) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  bind(fd, (void *)&sa, sizeof sa); listen(fd, 1);
  struct timeval tv = {100, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  accept_wait(fd); return 0;
}
__attribute__((noinline)) void uring_wait(int fd) {
  for (;;) {
    long r = syscall(__NR_io_uring_enter, fd, 0, 1, IORING_ENTER_GETEVENTS, NULL, 0);
    if (r < 0 && errno == EINTR) say("io_uring_enter: EINTR\n");
    else if (r < 0) { say("io_uring_enter: error\n"); sleep(100); }
  }
}
static void *uring_thread(void *a) {
  struct io_uring_params p; memset(&p, 0, sizeof p);
  int fd = syscall(__NR_io_uring_setup, 4, &p);
  if (fd < 0) { say("no io_uring\n"); return 0; }
  uring_wait(fd); return 0;
}
int main(void) {
  pthread_t t;
  pthread_create(&t, 0, recv_thread, 0);
  pthread_create(&t, 0, accept_thread, 0);
  pthread_create(&t, 0, uring_thread, 0);
  printf("ready pid=%d\n", getpid()); fflush(stdout);
  for (;;) pause();
}
