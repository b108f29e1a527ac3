/* The lines of one zstd-compressed JSON Lines object kiln did not
 * necessarily write (raw zone, quarantine): the whole frame is checked
 * first (exactly one complete frame, content checksum matching), then
 * decompressed again a chunk at a time and handed over line by line, so no
 * line of a corrupt object reaches the caller and memory stays at one line
 * (bounded: a zstd bomb of one endless line stops at its cap). */
#ifndef KILN_SHARD_ZST_LINES_H
#define KILN_SHARD_ZST_LINES_H

#include <stddef.h>
#include <stdint.h>

/* Calls cb(ctx, number, text, len) for each line of zst[0..len) in order
 * (number 1-based; text without its '\n', valid until cb returns). A
 * non-zero return from cb stops and is returned. KILN_EINVALID, with a
 * one-line message naming `where` (and the line number), for input that is
 * not exactly one complete zstd frame with a matching checksum (refused
 * before cb is first called), a line longer than line_max bytes, or a last
 * line without its '\n'. */
int kiln_zst_lines(const void *zst, size_t len, const char *where, size_t line_max,
                   int (*cb)(void *ctx, uint64_t number, const char *text, size_t len), void *ctx);

#endif
