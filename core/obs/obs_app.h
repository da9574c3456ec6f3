/*
 * The metrics a dashboard needs beyond what each module counts itself
 * (docs/observability.md, "Metrics"): every series present at zero from
 * start, eai_build_info, the backends' readiness and the process_* family
 * taken at each scrape.  Loop thread.
 */
#ifndef EAI_OBS_OBS_APP_H
#define EAI_OBS_OBS_APP_H

#include "app.h"

/* After the profiles and backends are loaded: zero series (executions by
 * profile and status, refusals by code, callbacks, deliveries) and
 * eai_build_info. */
void eai_obs_app_metrics(struct eai_app *app);
/* Before rendering /metrics: eai_backend_ready{backend} from each loaded
 * backend's probe (non-blocking) and process_* from /proc/self. */
void eai_obs_scrape(struct eai_app *app);

#endif
