/* The fixed head of every kiln glue (kiln/compiler/aot/glue.py), after the #defines the glue
 * generates: KILN_LIBRARY, the library's name, which KILN_EXPORT prefixes to the names it
 * exports (KILN_EXPORT(_init) is <NAME>_init). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KILN_API __attribute__((visibility("default")))
#define KILN_PASTE(a, b) a##b
#define KILN_EXPORT_(library, name) KILN_PASTE(library, name)
#define KILN_EXPORT(name) KILN_EXPORT_(KILN_LIBRARY, name)
#define KILN_STRING_(x) #x
#define KILN_STRING(x) KILN_STRING_(x)

