/* Replays a fuzz corpus without libFuzzer, so `make check` runs every saved
 * input through the target with any compiler. Corpus folder: argv[1], else
 * the one the build names (KILN_FUZZ_CORPUS). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : KILN_FUZZ_CORPUS;
	struct dirent *de;
	int count = 0;
	DIR *d;

	if (!dir || !(d = opendir(dir))) {
		fprintf(stderr, "replay: cannot open corpus folder %s\n", dir ? dir : "(none)");
		return 1;
	}
	while ((de = readdir(d)) != NULL) {
		char path[4096];
		unsigned char *buf;
		long len;
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (!(f = fopen(path, "rb")))
			continue;
		fseek(f, 0, SEEK_END);
		len = ftell(f);
		rewind(f);
		buf = malloc(len > 0 ? (size_t)len : 1);
		if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
			fprintf(stderr, "replay: cannot read %s\n", path);
			return 1;
		}
		fclose(f);
		LLVMFuzzerTestOneInput(buf, (size_t)len);
		free(buf);
		count++;
	}
	closedir(d);
	printf("%d passed, 0 failed (corpus inputs replayed from %s)\n", count, dir);
	return count ? 0 : 1;
}
