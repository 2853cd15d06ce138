/*
 * pl_forkexit.c - fork children that end at once, as most of a shell's
 * and of make's do: one ends with _exit(), one with exit(), neither
 * allocates. The parent allocates first (the preload's state is then
 * READY), forks them one at a time and waits, and returns from main.
 * test_start_cost counts, under callgrind, what the children ran of the
 * preload's: its fork handlers and exit paths make no system call and
 * read no clock in a child that does not allocate (issue 18 item 12).
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
  void *p = malloc(100);
  free(p);
  for (int i = 0; i < 2; i++) {
    pid_t c = fork();
    if (c < 0)
      return 1;
    if (c == 0) {
      if (i == 0)
        _exit(0);
      exit(0);
    }
    int st;
    if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
      return 1;
  }
  return 0;
}
