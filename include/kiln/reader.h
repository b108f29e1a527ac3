/* kiln's public reader API (placeholder until written). */
#ifndef KILN_READER_H
#define KILN_READER_H
#endif
