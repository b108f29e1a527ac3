/* Garbage collection of store objects no kept version references (placeholder). */
#ifndef KILN_MANIFEST_GC_H
#define KILN_MANIFEST_GC_H
#endif
