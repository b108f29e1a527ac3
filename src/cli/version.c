/* kiln's build information (see version.h). The library versions are
 * asked at run time of the layer that owns each library: libzstd of shard/,
 * librdkafka of ingest/, libgit2 of manifest/. */
#include "cli/version.h"

#include "config.h"
#include "ingest/kafka_run.h"
#include "manifest/manifest.h"
#include "shard/zstd_pool.h"

void kiln_cli_build_info(kiln_build_info *out)
{
	*out = (kiln_build_info){
	    .version = PACKAGE_VERSION,
	    .commit = kiln_cli_build_commit,
	    .zstd = kiln_zstd_version(),
	    .librdkafka = kiln_kafka_librdkafka_version(),
	    .libgit2 = kiln_manifest_libgit2_version(),
	};
}

void kiln_cli_print_version(FILE *out)
{
	kiln_build_info b;

	kiln_cli_build_info(&b);
	fprintf(out, "kiln %s\ncommit=%s zstd=%s librdkafka=%s libgit2=%s\n", b.version, b.commit, b.zstd,
	        b.librdkafka, b.libgit2);
}
