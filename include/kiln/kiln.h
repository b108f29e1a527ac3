/* libkiln's public API in one include: `#include <kiln/kiln.h>` and link
 * with `pkg-config --cflags --libs kiln`. common.h has the error codes and
 * the types the calls share; reader.h opens a dataset version and streams
 * its shards (docs/READING.md). */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include "common.h"
#include "reader.h"

#endif
