#include <stdlib.h>
#include <stdint.h>
int main(int argc,char**argv){ size_t n=(size_t)atoi(argv[1])<<20; volatile uint64_t* a=malloc(n); uint64_t s=0;
 for(size_t i=0;i<n/8;i++) a[i]=i;
 for(;;){ for(size_t i=0;i<n/8;i+=8) { s+=a[i]; a[i]=s; } } }
