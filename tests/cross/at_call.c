/*
 * at_call.c - memtop attach's aarch64 call (src/attach/arch_aarch64.c)
 * made in real aarch64 code, under qemu-aarch64 (which has no ptrace):
 * a signal handler stands for memtop's stop. A thread blocked in read(2)
 * on a pipe gets SIGUSR1 (SA_RESTART): as at a ptrace stop, the kernel
 * has put x0 back and pc on the svc already. The handler saves the
 * registers (the ucontext's: NT_PRSTATUS's layout), builds the call's
 * frame with mt_arch_aarch64.call_frame below the interrupted stack
 * pointer, as inject.c does, and returns into it; the function returns
 * to address 0, whose SIGSEGV handler checks it is the call's end
 * (mt_arch_aarch64.returned, x0 the result) and puts the saved registers
 * back. The read is then issued again and gets what main writes after.
 * Checked: the result, the read's bytes and return value, the restart
 * decision (read is not a restart-block call), and that no other fault
 * came. What it does not check: ptrace's regsets themselves (the FP
 * state here is the kernel's sigreturn's, not NT_PRFPREG's).
 * Prints "ok" and exits 0, or says what failed and exits 1.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "attach/arch.h"

/* inject.c's room below the interrupted stack pointer (STACK_GAP), and
 * the 64 bytes below sp_cur it gives the frame. */
#define GAP (512 + 64)

static mt_arch_aarch64_regs_t saved;
static volatile sig_atomic_t calls, ends, faults, restart_block;
static volatile uint64_t result;
static int pipefd[2];

static uint64_t __attribute__((noinline)) fn(uint64_t a, uint64_t b) {
  calls++;
  return a * 1000 + b;
}

/* The ucontext's registers are x0..x30, sp, pc, pstate: NT_PRSTATUS's. */
static void *regs_of(void *ctx) {
  return ((ucontext_t *)ctx)->uc_mcontext.regs;
}

static void on_usr1(int sig, siginfo_t *si, void *ctx) {
  (void)sig, (void)si;
  const mt_arch_t *a = &mt_arch_aarch64;
  memcpy(&saved, regs_of(ctx), sizeof saved);
  restart_block = a->restart_block(&saved);
  mt_arch_aarch64_regs_t r = saved;
  uint64_t push = a->call_frame(&r, (uint64_t)(uintptr_t)fn, 11, 22,
                                ((saved.sp - GAP) & ~(uint64_t)15));
  if (push != 0)
    faults++;
  memcpy(regs_of(ctx), &r, sizeof r);
}

static void on_segv(int sig, siginfo_t *si, void *ctx) {
  (void)sig, (void)si;
  uint64_t ret = 0;
  if (!mt_arch_aarch64.returned(regs_of(ctx), &ret)) {
    static const char msg[] = "FAILED: a fault that is not the call's end\n";
    (void)!write(1, msg, sizeof msg - 1);
    _exit(1);
  }
  result = ret;
  ends++;
  memcpy(regs_of(ctx), &saved, sizeof saved);
}

static ssize_t got;
static int got_errno;
static char buf[8];

static void *reader(void *arg) {
  (void)arg;
  got = read(pipefd[0], buf, 4);
  got_errno = errno;
  return NULL;
}

static void pause_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sa.sa_sigaction = on_usr1;
  sigaction(SIGUSR1, &sa, NULL);
  sa.sa_sigaction = on_segv;
  sigaction(SIGSEGV, &sa, NULL);
  if (pipe(pipefd) != 0)
    return 1;
  pthread_t t;
  pthread_create(&t, NULL, reader, NULL);
  pause_ms(200); /* the reader is in read(2) */
  pthread_kill(t, SIGUSR1);
  for (int i = 0; i < 500 && ends == 0; i++)
    pause_ms(10);
  pause_ms(100); /* the read issued again */
  if (write(pipefd[1], "ping", 4) != 4)
    return 1;
  pthread_join(t, NULL);
  int ok = 1;
  if (calls != 1 || ends != 1 || result != 11022 || faults != 0) {
    printf("FAILED: calls %d ends %d result %llu faults %d\n", (int)calls,
           (int)ends, (unsigned long long)result, (int)faults);
    ok = 0;
  }
  if (got != 4 || memcmp(buf, "ping", 4) != 0) {
    printf("FAILED: the read after the call returned %zd (%s)\n", got,
           got < 0 ? strerror(got_errno) : "bytes");
    ok = 0;
  }
  if (restart_block || saved.x[8] != 63) {
    printf("FAILED: x8 %llu, restart block %d: not read's\n",
           (unsigned long long)saved.x[8], (int)restart_block);
    ok = 0;
  }
  if (ok)
    printf("call 11, 22 -> %llu; read restarted -> %zd bytes\nok\n",
           (unsigned long long)result, got);
  return ok ? 0 : 1;
}
