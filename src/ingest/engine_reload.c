/* SIGHUP for a streaming run (see kiln_engine_reload in engine_internal.h): the
 * pipeline file loaded again; log.* and the snapshot policy applied on the
 * run's thread, every other change reported as needing a restart. */
#include "ingest/engine_internal.h"

#include "core/buf.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/notify.h"
#include "core/yaml_doc.h"

/* What changes while running: these sections, whole. */
static const char *const live_sections[] = {"log", "snapshot", NULL};

void kiln_engine_reload(kiln_engine *e)
{
	const kiln_pipeline *last = e->reloaded ? e->reloaded : e->p;
	kiln_pipeline *next = NULL;
	kiln_buf report = KILN_BUF_INIT(0);
	const char *applied, *ignored;

	kiln_notify_reloading();
	if (kiln_pipeline_load(&next, e->p->file, e->o->sets, e->o->set_count) < 0) {
		KILN_LOG(KILN_LOG_ERROR, "reload_failed", kiln_error_last(),
		         KILN_F_STR("keeping", "the configuration in force"));
		kiln_notify("READY=1\nSTATUS=reload refused: the pipeline file does not load (see the log)");
		return;
	}
	kiln_config_reload_report(kiln_yaml_root(e->p->doc), kiln_yaml_root(last->doc),
	                          kiln_yaml_root(next->doc), live_sections, &report, &applied, &ignored);
	kiln_log_setup(next->log_json, next->log_level);
	e->snapshot_records = next->snapshot_records;
	e->snapshot_seconds = next->snapshot_seconds;
	if (e->drain)
		atomic_store(&e->drain->seconds, next->drain_seconds);
	KILN_LOG(KILN_LOG_INFO, "reloaded",
	         *ignored ? "applied what changed; the keys ignored need a restart" : "applied what changed",
	         KILN_F_STR("pipeline", e->p->file), KILN_F_STR("applied", applied),
	         KILN_F_STR("ignored", ignored), KILN_F_INT("snapshot_records", e->snapshot_records),
	         KILN_F_INT("snapshot_seconds", e->snapshot_seconds),
	         KILN_F_INT("drain_seconds", next->drain_seconds));
	kiln_buf_free(&report);
	kiln_pipeline_free(e->reloaded);
	e->reloaded = next;
	kiln_notify("READY=1\nSTATUS=consuming: reloaded");
}
