/* Stable train/dev/test assignment (see split.h). */
#include "shard/split.h"

#include <math.h>
#include <sodium.h>
#include <string.h>

#include "core/error.h"

static const char *const names[KILN_SPLIT_COUNT] = {"train", "dev", "test"};

const char *kiln_split_name(kiln_split split)
{
	return (unsigned)split < KILN_SPLIT_COUNT ? names[split] : "unknown";
}

int kiln_split_from_name(const char *name, kiln_split *out)
{
	for (int i = 0; i < KILN_SPLIT_COUNT; i++)
		if (strcmp(name, names[i]) == 0) {
			*out = (kiln_split)i;
			return 0;
		}
	return -1;
}

int kiln_splitter_init(kiln_splitter *out, const char *salt, const double ratios[KILN_SPLIT_COUNT])
{
	long parts[KILN_SPLIT_COUNT], sum = 0;

	memset(out, 0, sizeof(*out));
	for (int i = 0; i < KILN_SPLIT_COUNT; i++) {
		double scaled = ratios[i] * 10000.0;
		if (!(ratios[i] >= 0 && ratios[i] <= 1))
			return kiln_error_set(KILN_EINVALID, "split ratio %s must be between 0 and 1",
			                      names[i]);
		parts[i] = lround(scaled);
		if (fabs(scaled - (double)parts[i]) > 1e-6)
			return kiln_error_set(
			    KILN_EINVALID,
			    "split ratio %s must be a multiple of 0.0001 (buckets are 1/10000)", names[i]);
		sum += parts[i];
		out->ratios[i] = ratios[i];
	}
	if (sum != 10000)
		return kiln_error_set(KILN_EINVALID, "split ratios sum to %.4f, not 1",
		                      (double)sum / 10000.0);
	out->salt = salt;
	out->salt_len = strlen(salt);
	out->train_below = (uint32_t)parts[KILN_SPLIT_TRAIN];
	out->dev_below = (uint32_t)(parts[KILN_SPLIT_TRAIN] + parts[KILN_SPLIT_DEV]);
	return 0;
}

uint32_t kiln_split_bucket(const kiln_splitter *s, const char *value, size_t len)
{
	crypto_generichash_state st;
	unsigned char digest[32];
	const unsigned char sep = 0x1F;
	uint64_t v = 0;

	crypto_generichash_init(&st, NULL, 0, sizeof(digest));
	crypto_generichash_update(&st, (const unsigned char *)s->salt, s->salt_len);
	crypto_generichash_update(&st, &sep, 1);
	crypto_generichash_update(&st, (const unsigned char *)value, len);
	crypto_generichash_final(&st, digest, sizeof(digest));
	for (int i = 7; i >= 0; i--)
		v = v << 8 | digest[i]; /* little-endian */
	return (uint32_t)(v % 10000);
}

kiln_split kiln_split_assign(const kiln_splitter *s, const char *value, size_t len)
{
	uint32_t b = kiln_split_bucket(s, value, len);

	return b < s->train_below ? KILN_SPLIT_TRAIN : b < s->dev_below ? KILN_SPLIT_DEV : KILN_SPLIT_TEST;
}
