/* `kiln init DIR`: makes a working project in a new or empty folder: an
 * ODCS contract for the example dataset "tickets" (one personal field), a
 * file pipeline over the sample records it writes, a Kafka pipeline for
 * `kiln broker`, cache.yaml, targets.yaml, a fresh pseudonymisation key
 * (keys/hmac.key, 0600) and a README of next steps whose commands run as
 * written. The files are the templates below, embedded in the binary; the
 * store and the manifest repository go under DIR/.kiln/ when a run makes
 * them. Nothing is ever overwritten: a folder that holds anything is
 * refused, and a failure removes what was made. */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "core/buf.h"
#include "core/error.h"
#include "core/fs.h"
#include "mask/key.h"

static const char usage_text[] =
    "usage: kiln init DIR\n"
    "\n"
    "Makes a working kiln project in DIR (created when missing; an existing\n"
    "folder must be empty): the contract contracts/tickets.yaml of an example\n"
    "dataset with one personal field, data/sample.jsonl, pipelines/file.yaml\n"
    "(reads the sample into tickets@main), pipelines/kafka.yaml (a Kafka topic,\n"
    "against `kiln broker`), cache.yaml, targets.yaml, a new pseudonymisation\n"
    "key keys/hmac.key (mode 0600, as kiln keygen --hmac makes it) and a\n"
    "README.md of next steps. Runs write the store and the manifest repository\n"
    "under DIR/.kiln/. Then:\n"
    "\n"
    "  cd DIR && kiln run pipelines/file.yaml\n"
    "\n"
    "Options:\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 when the project was made, 2 otherwise (a folder that is\n"
    "not empty, a file that cannot be written; nothing is left behind).\n";

static const char readme_text[] =
    "# tickets: a kiln project\n"
    "\n"
    "Made by `kiln init`. It curates the example dataset `tickets` (support\n"
    "tickets with one personal field, `customer_email`) into versioned,\n"
    "pseudonymised train/dev/test shards. Run the commands below from this\n"
    "folder, in order: each block runs as pasted.\n"
    "\n"
    "| path | what it is |\n"
    "|---|---|\n"
    "| `contracts/tickets.yaml` | the ODCS v3 data contract every record is checked against |\n"
    "| `pipelines/file.yaml` | the pipeline that reads `data/sample.jsonl` into `tickets@main` |\n"
    "| `pipelines/kafka.yaml` | the same dataset from the Kafka topic `tickets` into `tickets@stream` |\n"
    "| `data/sample.jsonl` | eight sample records |\n"
    "| `keys/hmac.key` | the pseudonymisation key (mode 0600; `kiln keygen --hmac` makes another): never "
    "commit it |\n"
    "| `cache.yaml` | a cache node pinning `tickets@main` under `.kiln/cache` |\n"
    "| `targets.yaml` | the push target `local`, a file store under `.kiln/pushed` |\n"
    "| `.kiln/` | what runs write: the store `.kiln/store` and the manifest repository `.kiln/manifest.git` "
    "|\n"
    "\n"
    "## 1. Run the file pipeline\n"
    "\n"
    "```sh\n"
    "kiln check pipelines/file.yaml                 # what kiln run would refuse: nothing\n"
    "kiln run pipelines/file.yaml                   # validate, pseudonymise, split, shard, commit "
    "tickets@main\n"
    "kiln log tickets -m .kiln/manifest.git         # the versions\n"
    "kiln show tickets@main -m .kiln/manifest.git   # splits, shards, contract, key id, lineage\n"
    "kiln cat tickets@main -m .kiln/manifest.git --store file://.kiln/store --split train   # customer_email "
    "is a p1_ token\n"
    "```\n"
    "\n"
    "Append records to `data/sample.jsonl` and run it again: kiln reads only the\n"
    "new lines. A record the contract rejects is quarantined with its reason\n"
    "(`kiln quarantine ls tickets --pipeline pipelines/file.yaml`), never dropped.\n"
    "\n"
    "## 2. Contracts\n"
    "\n"
    "```sh\n"
    "kiln validate --contract contracts/tickets.yaml data/sample.jsonl\n"
    "kiln contract infer data/sample.jsonl --name tickets-draft   # a contract inferred from records, on "
    "stdout\n"
    "```\n"
    "\n"
    "For your own data: `kiln contract infer YOUR.jsonl -o contracts/NAME.yaml`,\n"
    "review it (types, required fields, enums, the fields it classified `pii`),\n"
    "then point a pipeline's `contract:` at it.\n"
    "\n"
    "## 3. Promote, verify, cache and push a version\n"
    "\n"
    "```sh\n"
    "kiln keygen --out keys/signing.key             # an ed25519 key that signs promoted versions\n"
    "echo \"kiln@localhost namespaces=\\\"git\\\" $(cat keys/signing.key.pub)\" >keys/allowed_signers\n"
    "kiln promote tickets@main --pipeline pipelines/file.yaml --set "
    "manifest.signing_key=$PWD/keys/signing.key\n"
    "kiln verify tickets@v1 -m .kiln/manifest.git --store file://.kiln/store --deep --allowed-signers "
    "keys/allowed_signers\n"
    "kiln cache sync --once cache.yaml              # the pinned versions on local disk, as training jobs "
    "read them\n"
    "ls .kiln/cache/views/tickets/main/train\n"
    "kiln push tickets@v1 --to local --targets targets.yaml --pipeline pipelines/file.yaml\n"
    "```\n"
    "\n"
    "## 4. Stream from Kafka\n"
    "\n"
    "`kiln broker` is an embedded Kafka broker for development (in memory, on a\n"
    "port it picks); against a real cluster set `KILN_BROKERS=host:9092,...`.\n"
    "Producing the samples takes `kcat` (Debian package kcat).\n"
    "\n"
    "```sh\n"
    "kiln broker --topics tickets --port-file .kiln/broker.port >.kiln/broker.log 2>&1 &\n"
    "broker=$!\n"
    "until [ -s .kiln/broker.port ]; do sleep 0.1; done\n"
    "export KILN_BROKERS=$(cat .kiln/broker.port)\n"
    "kiln check pipelines/kafka.yaml                # the brokers answer, the topic exists\n"
    "kcat -P -b \"$KILN_BROKERS\" -t tickets <data/sample.jsonl\n"
    "kiln run pipelines/kafka.yaml --stop-at-end    # read what the topic holds, commit tickets@stream, "
    "stop\n"
    "kill $broker\n"
    "```\n"
    "\n"
    "Without `--stop-at-end` the run stays in the consumer group and commits a\n"
    "snapshot every `snapshot.records` records or `snapshot.seconds` seconds\n"
    "until SIGTERM.\n"
    "\n"
    "Every key of these files is described in kiln's documentation:\n"
    "docs/PIPELINES.md (pipelines), docs/CONTRACTS.md (contracts),\n"
    "docs/CACHE.md (`cache.yaml`), docs/PUSH.md (`targets.yaml`) and\n"
    "docs/STREAMING.md (Kafka).\n";

static const char gitignore_text[] = "# what kiln runs write, and the keys: never commit these\n"
                                     ".kiln/\n"
                                     "keys/\n";

static const char contract_text[] =
    "# Data contract for the example dataset \"tickets\": support tickets as the\n"
    "# help desk publishes them. ODCS v3.1; every key kiln reads is in kiln's\n"
    "# docs/CONTRACTS.md. customer_email is personal: kiln replaces it with a\n"
    "# keyed token (classification: pii), so no curated shard holds it.\n"
    "apiVersion: v3.1.0\n"
    "kind: DataContract\n"
    "id: tickets\n"
    "name: Support tickets\n"
    "version: 1.0.0\n"
    "status: active\n"
    "schema:\n"
    "  - name: ticket\n"
    "    logicalType: object\n"
    "    properties:\n"
    "      - name: ticket_id\n"
    "        logicalType: string\n"
    "        required: true\n"
    "        logicalTypeOptions:\n"
    "          format: uuid\n"
    "      - name: opened_at\n"
    "        logicalType: timestamp\n"
    "        required: true\n"
    "      - name: customer_email\n"
    "        logicalType: string\n"
    "        required: true\n"
    "        classification: pii          # pseudonymised: a p1_... token in curated data\n"
    "        logicalTypeOptions:\n"
    "          format: email\n"
    "      - name: channel\n"
    "        logicalType: string\n"
    "        required: true\n"
    "        customProperties:\n"
    "          - property: enum\n"
    "            value: [email, chat, phone, web]\n"
    "      - name: priority\n"
    "        logicalType: string\n"
    "        required: true\n"
    "        customProperties:\n"
    "          - property: enum\n"
    "            value: [low, normal, high, urgent]\n"
    "      - name: subject\n"
    "        logicalType: string\n"
    "        required: true\n"
    "        logicalTypeOptions:\n"
    "          minLength: 1\n"
    "          maxLength: 200\n"
    "      - name: resolution_minutes\n"
    "        logicalType: integer\n"
    "        logicalTypeOptions:\n"
    "          minimum: 0\n"
    "      - name: tags\n"
    "        logicalType: array\n"
    "        items:\n"
    "          logicalType: string\n"
    "          logicalTypeOptions:\n"
    "            maxLength: 32\n";

static const char pipeline_file_text[] =
    "# The file pipeline of the \"tickets\" dataset: reads data/sample.jsonl,\n"
    "# validates each record against contracts/tickets.yaml, pseudonymises the\n"
    "# personal field, splits train/dev/test by the customer, packs zstd shards\n"
    "# into the store and commits a version to tickets@main. Relative paths are\n"
    "# relative to this file's folder, so it runs from anywhere:\n"
    "#   kiln run pipelines/file.yaml\n"
    "# Every key is described in kiln's docs/PIPELINES.md.\n"
    "dataset: tickets\n"
    "branch: main\n"
    "contract: ../contracts/tickets.yaml\n"
    "\n"
    "source:\n"
    "  kind: file\n"
    "  path: ${KILN_INPUT:-../data/sample.jsonl}\n"
    "  name: tickets                # the topic name in lineage, quarantine and shard sources\n"
    "\n"
    "pseudonymise:\n"
    "  key_file: ../keys/hmac.key   # 64 hex characters, mode 0600 (kiln keygen --hmac)\n"
    "  key_version: 1\n"
    "\n"
    "split:\n"
    "  key: customer_email          # its token decides the split: one customer, one split\n"
    "  salt: tickets-v1\n"
    "  ratios: {train: 0.8, dev: 0.1, test: 0.1}\n"
    "\n"
    "store:\n"
    "  url: file://../.kiln/store   # or s3://bucket/prefix (docs/STORES.md)\n"
    "\n"
    "manifest:\n"
    "  repo: ../.kiln/manifest.git  # the versions: a bare git repository\n";

static const char pipeline_kafka_text[] =
    "# The Kafka pipeline of the \"tickets\" dataset: a consumer group on the topic\n"
    "# tickets, each batch landed byte-exact in the raw zone, then validated,\n"
    "# pseudonymised, split and committed as snapshots to tickets@stream (its own\n"
    "# branch: the file pipeline's versions stay on main). Against the embedded\n"
    "# development broker:\n"
    "#   kiln broker --topics tickets --port-file .kiln/broker.port &\n"
    "#   KILN_BROKERS=$(cat .kiln/broker.port) kiln run pipelines/kafka.yaml\n"
    "# It runs until SIGTERM (or with --stop-at-end until it has read what the\n"
    "# topic holds). Every key is described in kiln's docs/PIPELINES.md and\n"
    "# docs/STREAMING.md.\n"
    "dataset: tickets\n"
    "branch: stream\n"
    "contract: ../contracts/tickets.yaml\n"
    "\n"
    "source:\n"
    "  kind: kafka\n"
    "  brokers: ${KILN_BROKERS:-127.0.0.1:9092}\n"
    "  topics: [tickets]\n"
    "  group: kiln-tickets          # every `kiln run` of this pipeline shares the partitions\n"
    "  start: earliest\n"
    "  options:\n"
    "    session.timeout.ms: 6000   # suits kiln broker; librdkafka's default (45 s) suits a real cluster\n"
    "\n"
    "pseudonymise:\n"
    "  key_file: ../keys/hmac.key\n"
    "  key_version: 1\n"
    "\n"
    "split:\n"
    "  key: customer_email\n"
    "  salt: tickets-v1\n"
    "  ratios: {train: 0.8, dev: 0.1, test: 0.1}\n"
    "\n"
    "snapshot:\n"
    "  records: 10000               # commit after this many records...\n"
    "  seconds: 10                  # ...or this long after the last commit\n"
    "\n"
    "metrics:\n"
    "  listen: ${KILN_METRICS:-127.0.0.1:0}   # /metrics, /healthz, POST /v1/snapshot (port 0: any free "
    "one)\n"
    "\n"
    "store:\n"
    "  url: file://../.kiln/store\n"
    "\n"
    "manifest:\n"
    "  repo: ../.kiln/manifest.git\n";

static const char sample_text[] =
    "{\"ticket_id\":\"6f1c2b1e-8d4a-4c39-9a57-0b7e2f1d3a01\",\"opened_at\":\"2026-11-02T08:15:00Z\","
    "\"customer_email\":\"ana.lopez@example.com\",\"channel\":\"email\",\"priority\":\"normal\",\"subject\":"
    "\"Cannot reset my password\",\"resolution_minutes\":42,\"tags\":[\"account\"]}\n"
    "{\"ticket_id\":\"0b9a7d3c-51e2-4f8b-8c11-7a6d5e4f3b02\",\"opened_at\":\"2026-11-02T09:03:27Z\","
    "\"customer_email\":\"bo.chen@example.org\",\"channel\":\"chat\",\"priority\":\"high\",\"subject\":"
    "\"Invoice shows the wrong amount\",\"resolution_minutes\":15,\"tags\":[\"billing\",\"invoice\"]}\n"
    "{\"ticket_id\":\"c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e03\",\"opened_at\":\"2026-11-03T14:41:09Z\","
    "\"customer_email\":\"chloe.martin@example.net\",\"channel\":\"phone\",\"priority\":\"urgent\","
    "\"subject\":\"Service down since this morning\",\"tags\":[\"outage\"]}\n"
    "{\"ticket_id\":\"9e8d7c6b-5a49-4382-b716-05f4e3d2c104\",\"opened_at\":\"2026-11-04T10:20:00Z\","
    "\"customer_email\":\"ana.lopez@example.com\",\"channel\":\"web\",\"priority\":\"low\",\"subject\":\"How "
    "do I export my data?\",\"resolution_minutes\":180,\"tags\":[]}\n"
    "{\"ticket_id\":\"1a2b3c4d-5e6f-4a7b-9c8d-9e0f1a2b3c05\",\"opened_at\":\"2026-11-05T16:55:31Z\","
    "\"customer_email\":\"dev.patel@example.com\",\"channel\":\"email\",\"priority\":\"normal\",\"subject\":"
    "\"Feature request: dark mode\",\"resolution_minutes\":2880,\"tags\":[\"feedback\"]}\n"
    "{\"ticket_id\":\"f0e1d2c3-b4a5-4697-8879-6a5b4c3d2e06\",\"opened_at\":\"2026-11-06T07:12:45Z\","
    "\"customer_email\":\"eva.novak@example.org\",\"channel\":\"chat\",\"priority\":\"high\",\"subject\":"
    "\"Payment failed twice\",\"resolution_minutes\":30,\"tags\":[\"billing\"]}\n"
    "{\"ticket_id\":\"2468ace0-1357-49bd-8ace-02468ace1307\",\"opened_at\":\"2026-11-06T11:30:00Z\","
    "\"customer_email\":\"bo.chen@example.org\",\"channel\":\"phone\",\"priority\":\"normal\",\"subject\":"
    "\"Change the delivery address\",\"resolution_minutes\":8,\"tags\":[\"account\",\"shipping\"]}\n"
    "{\"ticket_id\":\"13579bdf-2468-4ace-9bdf-13579bdf2408\",\"opened_at\":\"2026-11-07T13:05:12Z\","
    "\"customer_email\":\"farid.haddad@example.net\",\"channel\":\"web\",\"priority\":\"low\",\"subject\":"
    "\"Typo on the pricing page\",\"tags\":[\"website\"]}\n";

static const char cache_text[] =
    "# A cache node for the \"tickets\" dataset: `kiln cache sync --once cache.yaml`\n"
    "# fetches the pinned versions' shards from the store, checks each against its\n"
    "# hash and lays them out under .kiln/cache/views/ as plain files a training\n"
    "# job reads; `kiln cache serve cache.yaml` also serves them over HTTP.\n"
    "# Relative paths are relative to this file's folder. Every key is described\n"
    "# in kiln's docs/CACHE.md.\n"
    "store:\n"
    "  url: file://.kiln/store      # the origin: the store the pipelines write\n"
    "manifest: .kiln/manifest.git\n"
    "dir: .kiln/cache\n"
    "size_limit: 1G\n"
    "pins: [tickets@main]           # a branch follows new versions; tickets@v1 stays\n"
    "listen: 127.0.0.1:9470         # kiln cache serve\n";

static const char targets_text[] =
    "# Push targets: `kiln push tickets@v1 --to local --targets targets.yaml\n"
    "# --pipeline pipelines/file.yaml` copies a promoted version (its shards and\n"
    "# signed manifest, never raw or quarantined records) to the target's store.\n"
    "# Here a file store under .kiln/pushed; for the cloud, an s3:// URL with its\n"
    "# region and credentials_file. Every key is described in kiln's docs/PUSH.md.\n"
    "targets:\n"
    "  local:\n"
    "    store:\n"
    "      url: file://.kiln/pushed\n"
    "      # url: s3://bucket/prefix\n"
    "      # region: eu-west-3\n"
    "      # credentials_file: s3.credentials   # 0600; else AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY\n"
    "    manifest_prefix: manifest.git\n"
    "    concurrency: 4\n";

typedef struct init_file {
	const char *path; /* relative to DIR */
	const char *text;
} init_file;

static const init_file init_files[] = {
    {"README.md", readme_text},
    {".gitignore", gitignore_text},
    {"contracts/tickets.yaml", contract_text},
    {"pipelines/file.yaml", pipeline_file_text},
    {"pipelines/kafka.yaml", pipeline_kafka_text},
    {"data/sample.jsonl", sample_text},
    {"cache.yaml", cache_text},
    {"targets.yaml", targets_text},
};

/* The folders, in the order they are made; keys/ is owner-only. */
static const struct {
	const char *path;
	mode_t mode;
} init_dirs[] = {{"contracts", 0755}, {"pipelines", 0755}, {"data", 0755}, {"keys", 0700}};

/* 0 when dir is an empty folder (*out_made false) or was made (*out_made
 * true); else the exit status, the message printed. */
static int open_target(const char *dir, bool *out_made)
{
	struct dirent *e;
	DIR *d;

	*out_made = false;
	if (mkdir(dir, 0755) == 0) {
		*out_made = true;
		return 0;
	}
	if (errno != EEXIST)
		return kiln_cli_fail("init", "%s: cannot create the folder: %s", dir, strerror(errno));
	if (!(d = opendir(dir)))
		return kiln_cli_fail("init", "%s: %s", dir,
		                     errno == ENOTDIR ? "exists and is not a folder" : strerror(errno));
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
			closedir(d);
			return kiln_cli_fail(
			    "init", "%s is not empty; kiln init makes a project in a new or empty folder",
			    dir);
		}
	closedir(d);
	return 0;
}

/* Removes what a failed init made: DIR itself when it made it, else each
 * entry it added. */
static void undo(const char *dir, bool made, size_t dirs_made, size_t files_made)
{
	kiln_buf p = KILN_BUF_INIT(0);

	if (made) {
		kiln_fs_remove_tree(dir);
		return;
	}
	for (size_t i = 0; i < files_made; i++) {
		kiln_buf_reset(&p);
		if (kiln_buf_printf(&p, "%s/%s", dir, init_files[i].path) == 0)
			kiln_fs_remove_tree(p.ptr);
	}
	for (size_t i = dirs_made; i-- > 0;) {
		kiln_buf_reset(&p);
		if (kiln_buf_printf(&p, "%s/%s", dir, init_dirs[i].path) == 0)
			kiln_fs_remove_tree(p.ptr);
	}
	kiln_buf_free(&p);
}

int kiln_cmd_init(int argc, char **argv)
{
	const kiln_cli_option rows[] = {KILN_CLI_END};
	const kiln_cli_spec spec = {
	    .cmd = "init",
	    .usage = usage_text,
	    .rows = rows,
	    .min_args = 1,
	    .max_args = 1,
	    .args_error = "expected one folder, DIR (see kiln init --help)",
	};
	kiln_buf p = KILN_BUF_INIT(0);
	kiln_key key;
	size_t dirs_made = 0, files_made = 0;
	bool made, key_made = false;
	const char *dir;
	int first, status;

	if ((status = kiln_cli_parse(&first, &spec, argc, argv)) != KILN_CLI_GO_ON)
		return status;
	dir = argv[first];
	if ((status = open_target(dir, &made)) != 0)
		return status;
	status = KILN_EXIT_USAGE;
	for (; dirs_made < sizeof(init_dirs) / sizeof(init_dirs[0]); dirs_made++) {
		kiln_buf_reset(&p);
		if (kiln_buf_printf(&p, "%s/%s", dir, init_dirs[dirs_made].path) < 0) {
			kiln_cli_fail("init", "%s", kiln_error_last());
			goto cleanup;
		}
		if (mkdir(p.ptr, init_dirs[dirs_made].mode) != 0) {
			kiln_cli_fail("init", "%s: cannot create the folder: %s", p.ptr, strerror(errno));
			goto cleanup;
		}
		/* the mode asked for, whatever the umask (keys/ stays owner-only) */
		if (chmod(p.ptr, init_dirs[dirs_made].mode) != 0) {
			kiln_cli_fail("init", "%s: cannot set the folder's mode: %s", p.ptr, strerror(errno));
			rmdir(p.ptr);
			goto cleanup;
		}
	}
	for (; files_made < sizeof(init_files) / sizeof(init_files[0]); files_made++) {
		const init_file *f = &init_files[files_made];
		kiln_buf_reset(&p);
		if (kiln_buf_printf(&p, "%s/%s", dir, f->path) < 0 ||
		    kiln_fs_create_new(p.ptr, f->text, strlen(f->text), 0644, "a project file") < 0) {
			kiln_cli_fail("init", "%s", kiln_error_last());
			goto cleanup;
		}
	}
	kiln_buf_reset(&p);
	if (kiln_buf_printf(&p, "%s/keys/hmac.key", dir) < 0 || kiln_key_generate_file(&key, p.ptr, 1) < 0) {
		kiln_cli_fail("init", "%s", kiln_error_last());
		goto cleanup;
	}
	key_made = true;
	printf(
	    "made the kiln project %s: the dataset tickets (contracts/tickets.yaml), pipelines/file.yaml,\n"
	    "pipelines/kafka.yaml, data/sample.jsonl, cache.yaml, targets.yaml and README.md\n",
	    dir);
	printf("pseudonymisation key: %s (mode 0600; never commit it), key id %s\n", p.ptr, key.id);
	printf("\nnext: cd %s && kiln run pipelines/file.yaml   (README.md has the steps after it)\n", dir);
	status = KILN_EXIT_OK;
cleanup:
	if (key_made)
		kiln_key_wipe(&key);
	if (status != KILN_EXIT_OK)
		undo(dir, made, dirs_made, files_made);
	kiln_buf_free(&p);
	return status;
}
