/* POST bodies as the server parses them (json_loadb, duplicates refused),
 * then JSON Schema validation (core/schema/jsonschema.h) against
 * contracts/v1/sandbox-execution.schema.json and tool-manifest.schema.json,
 * then execution validation (core/exec/exec_validate.h) with a profile set
 * shaped like tests/exec's.  A body that is a valid tool manifest is also
 * used as the tool document of a request naming it.
 * Invariants: valid <=> no errors; at most EAI_SCHEMA_MAX_ERRORS errors,
 * each {path: "" or "/...", message}; an accepted execution has a profile
 * from the set and limits that parse back within its maxima; a refusal
 * carries one of the documented codes and non-empty details. */
#include "base/errors.h"
#include "exec/exec_validate.h"
#include "fuzz_util.h"
#include "schema/jsonschema.h"

static struct eai_schema *exec_schema, *tool_schema;
static char *egress_small[] = {"example.org:443", "*.pypi.org:443", NULL};
static char *egress_none[] = {NULL};

#define MI (1LL << 20)
#define GI (1LL << 30)

static struct eai_profile profiles[] = {
    {.name = "gvisor", .backend = "gvisor", .runtime_class = "gvisor",
     .def_cpu_millis = 1000, .max_cpu_millis = 2000, .def_memory = 512 * MI, .max_memory = 2 * GI,
     .def_timeout_s = 30, .max_timeout_s = 300, .def_pids = 128, .max_pids = 512,
     .def_output_bytes = 1 * MI, .max_output_bytes = 8 * MI, .def_disk = 64 * MI, .max_disk = 1 * GI,
     .egress_allow = egress_none},
    {.name = "gvisor-small", .backend = "gvisor", .runtime_class = "gvisor",
     .def_cpu_millis = 500, .max_cpu_millis = 1000, .def_memory = 256 * MI, .max_memory = 512 * MI,
     .def_timeout_s = 30, .max_timeout_s = 60, .def_pids = 128, .max_pids = 256,
     .def_output_bytes = 1 * MI, .max_output_bytes = 1 * MI, .def_disk = 64 * MI, .max_disk = 256 * MI,
     .egress_allow = egress_small},
};
#define NPROFILES 2

static const char *fixed_tool =
    "{\"apiVersion\": \"eai.dev/v1\", \"kind\": \"Tool\", \"metadata\": {\"name\": \"fz-tool\"},"
    " \"spec\": {\"sandbox_profile\": \"gvisor-small\", \"image\": \"busybox\","
    " \"command\": [\"sh\", \"-c\", \"echo 4\"], \"limits\": {\"cpu\": \"250m\", \"memory\": \"128Mi\"},"
    " \"env\": {\"A\": \"1\"}, \"egress\": [\"example.org:443\"]}}";
static json_t *fixed_tool_doc;

static int known_images(void *arg, const struct eai_profile *p, const char *image)
{
    (void)arg;
    (void)p;
    return strcmp(image, "python:3.11-slim") == 0 || strcmp(image, "busybox") == 0;
}

static struct eai_schema *load(const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/contracts/v1/%s", EAI_SOURCE_DIR, name);
    struct eai_error *err = NULL;
    struct eai_schema *s = eai_schema_load_file(path, &err);
    if (!s) {
        fprintf(stderr, "cannot load %s: %s\n", path, err && err->message ? err->message : "?");
        abort();
    }
    return s;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    exec_schema = load("sandbox-execution.schema.json");
    tool_schema = load("tool-manifest.schema.json");
    fixed_tool_doc = json_loads(fixed_tool, 0, NULL);
    FZ_ASSERT(fixed_tool_doc != NULL);
    return 0;
}

static void check_errors(int valid, json_t *errors)
{
    FZ_ASSERT(json_is_array(errors));
    FZ_ASSERT(valid == (json_array_size(errors) == 0));
    FZ_ASSERT(json_array_size(errors) <= EAI_SCHEMA_MAX_ERRORS);
    size_t i;
    json_t *e;
    json_array_foreach(errors, i, e) {
        const char *p = json_string_value(json_object_get(e, "path"));
        FZ_ASSERT(p != NULL && (p[0] == '\0' || p[0] == '/'));
        FZ_ASSERT(json_is_string(json_object_get(e, "message")));
    }
}

static void run_exec(const json_t *body, const json_t *tool_doc)
{
    struct eai_exec_vopts opts = {.files_max_total_bytes = 8 * MI, .image_known = known_images};
    json_t *out = NULL;
    const struct eai_profile *prof = NULL;
    struct eai_error *err = NULL;
    int rc = eai_exec_validate(body, tool_doc, profiles, NPROFILES, &opts, &out, &prof, &err);
    if (rc == 0) {
        FZ_ASSERT(err == NULL && json_is_object(out));
        FZ_ASSERT(prof == &profiles[0] || prof == &profiles[1]);
        struct eai_exec_limits l;
        FZ_ASSERT(eai_exec_limits_parse(json_object_get(out, "limits"), &l) == 0);
        FZ_ASSERT(l.cpu_millis > 0 && l.cpu_millis <= prof->max_cpu_millis);
        FZ_ASSERT(l.memory_bytes > 0 && l.memory_bytes <= prof->max_memory);
        FZ_ASSERT(l.timeout_s > 0 && l.timeout_s <= prof->max_timeout_s);
        FZ_ASSERT(l.pids > 0 && l.pids <= prof->max_pids);
        FZ_ASSERT(l.output_bytes > 0 && l.output_bytes <= prof->max_output_bytes);
        FZ_ASSERT(l.disk_bytes > 0 && l.disk_bytes <= prof->max_disk);
        FZ_ASSERT(json_is_string(json_object_get(out, "image")));
        json_t *cmd = json_object_get(out, "command");
        FZ_ASSERT(json_is_array(cmd) && json_array_size(cmd) > 0);
        char h[65];
        FZ_ASSERT(eai_exec_request_hash(body, h) == 0 && fz_lower_hex(h, 64));
        json_decref(out);
    } else {
        FZ_ASSERT(rc == -1 && err != NULL);
        FZ_ASSERT(err->code == EAI_E_VALIDATION_FAILED || err->code == EAI_E_UNKNOWN_PROFILE ||
                  err->code == EAI_E_LIMIT_EXCEEDED || err->code == EAI_E_EGRESS_NOT_ALLOWED ||
                  err->code == EAI_E_UNKNOWN_IMAGE);
        FZ_ASSERT(json_is_array(err->details) && json_array_size(err->details) > 0);
        eai_error_free(err);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t je;
    json_t *body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
    if (!body)
        return 0;

    /* as a tool manifest */
    json_t *errors = NULL;
    int valid = eai_schema_validate(tool_schema, body, &errors);
    check_errors(valid, errors);
    json_decref(errors);
    if (valid) {
        const char *name = json_string_value(json_object_get(json_object_get(body, "metadata"), "name"));
        FZ_ASSERT(name != NULL);
        json_t *req = json_pack("{s:s}", "tool", name);
        FZ_ASSERT(req != NULL);
        run_exec(req, body);
        json_decref(req);
    }

    /* as an execution request */
    errors = NULL;
    valid = eai_schema_validate(exec_schema, body, &errors);
    check_errors(valid, errors);
    eai_exec_schema_filter(body, errors);
    if (json_array_size(errors) == 0) {
        const char *tool = json_string_value(json_object_get(body, "tool"));
        run_exec(body, tool && strcmp(tool, "fz-tool") == 0 ? fixed_tool_doc : NULL);
    }
    json_decref(errors);
    json_decref(body);
    return 0;
}
