/*
 * at_sleep.c - a program whose one thread sleeps in clock_nanosleep(2),
 * 50 ms at a time, for the aarch64 VM (tests/cross/vm_attach.c): memtop
 * attach stops it inside the call, whose restart goes through the
 * kernel's restart block (arch.h: the kernel has put x0 and pc back
 * before the stop, NT_ARM_SYSTEM_CALL reads -1); after the calls the
 * saved registers issue it again. No sleep may end early with EINTR
 * (nothing of the program interrupted it) or an error.
 *
 * Prints "ready PID"; on SIGUSR1 (whose handler interrupts the sleep, as
 * it may) "slept N" and exits 0; "interrupted RC after N" and exits 1 if a
 * sleep ended with RC before that.
 */
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_usr1(int sig) {
  (void)sig;
  stop = 1;
}

int main(void) {
  struct sigaction sa = {0};
  sa.sa_handler = on_usr1;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, NULL);
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  long n = 0;
  for (;;) {
    struct timespec ts = {0, 50 * 1000000L};
    int r = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
    if (stop) {
      printf("slept %ld\n", n);
      return 0;
    }
    if (r != 0) {
      printf("interrupted %d after %ld\n", r, n);
      return 1;
    }
    n++;
  }
}
