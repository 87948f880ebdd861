// bench/cache_pressure: a neighbour that streams through N MiB until killed, one cache
// line at a time, reading and writing. It measures how much a program slows when
// another process competes for the shared cache and memory (docs/PERFORMANCE.md@6bf7154, "Why
// confirmation is not enough").
//
//   gcc -O2 -o cache_pressure bench/cache_pressure.c
//   ./cache_pressure 64 &   # then time programs on another CPU; kill it afterwards
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  long mib = argc == 2 ? atol(argv[1]) : 0;
  if (mib <= 0 || mib > 65536) {
    fprintf(stderr, "usage: cache_pressure MIB (1 to 65536)\n");
    return 2;
  }
  size_t bytes = (size_t)mib << 20;
  volatile char* a = malloc(bytes);
  if (!a) {
    fprintf(stderr, "cache_pressure: cannot allocate %ld MiB\n", mib);
    return 1;
  }
  memset((char*)a, 1, bytes);
  for (;;)
    for (size_t i = 0; i < bytes; i += 64) a[i]++;
}
