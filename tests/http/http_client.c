#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "http_client.h"

long th_timeout_ms;

struct buf {
    char *p;
    size_t n;
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *arg)
{
    struct buf *b = arg;
    size_t n = size * nmemb;
    char *q = realloc(b->p, b->n + n + 1);
    if (!q)
        return 0;
    memcpy(q + b->n, ptr, n);
    b->n += n;
    q[b->n] = '\0';
    b->p = q;
    return n;
}

struct zero_src {
    size_t left;
};

static size_t on_read(char *ptr, size_t size, size_t nmemb, void *arg)
{
    struct zero_src *z = arg;
    size_t n = size * nmemb;
    if (n > z->left)
        n = z->left;
    memset(ptr, ' ', n);
    z->left -= n;
    return n;
}

int th_request(const char *method, const char *url, const char *const *headers, const char *body,
               size_t body_len, size_t upload_bytes, struct th_resp *out)
{
    memset(out, 0, sizeof(*out));
    CURL *c = curl_easy_init();
    if (!c)
        return -1;
    struct buf b = {0}, h = {0};
    struct curl_slist *hl = NULL;
    for (int i = 0; headers && headers[i]; i++)
        hl = curl_slist_append(hl, headers[i]);
    struct zero_src z = {upload_bytes};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, th_timeout_ms > 0 ? th_timeout_ms : 60000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (upload_bytes) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(c, CURLOPT_READDATA, &z);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)upload_bytes);
    } else if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)body_len);
    }
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_easy_getinfo(c, CURLINFO_TOTAL_TIME, &out->seconds);
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    out->body = b.p ? b.p : strdup("");
    out->len = b.n;
    out->headers = h.p ? h.p : strdup("");
    json_error_t je;
    out->json = out->len ? json_loadb(out->body, out->len, 0, &je) : NULL;
    if (rc != CURLE_OK && out->status == 0) {
        if (!getenv("TH_QUIET"))
            fprintf(stderr, "curl %s %s: %s\n", method, url, curl_easy_strerror(rc));
        return -1;
    }
    return 0;
}

void th_resp_free(struct th_resp *r)
{
    free(r->body);
    free(r->headers);
    json_decref(r->json);
    memset(r, 0, sizeof(*r));
}

const char *th_header(const struct th_resp *r, const char *name)
{
    static char val[1024];
    const char *found = NULL;
    size_t nl = strlen(name);
    for (const char *p = r->headers; p && *p;) {
        const char *eol = strstr(p, "\r\n");
        if (!eol)
            break;
        if ((size_t)(eol - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ')
                v++;
            size_t n = (size_t)(eol - v);
            if (n >= sizeof(val))
                n = sizeof(val) - 1;
            memcpy(val, v, n);
            val[n] = '\0';
            found = val;
        }
        p = eol + 2;
    }
    return found;
}

const char *th_code(const struct th_resp *r)
{
    const char *s = json_string_value(json_object_get(json_object_get(r->json, "error"), "code"));
    return s ? s : "";
}

int th_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || getsockname(fd, (struct sockaddr *)&a, &l) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

int th_eaid(const char *eaid, char **out, const char *const *args)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(pfd[1], 1);
        const char *argv[32];
        int n = 0;
        argv[n++] = eaid;
        for (int i = 0; args[i] && n < 31; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        execv(eaid, (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    struct buf b = {0};
    char tmp[4096];
    ssize_t n;
    while ((n = read(pfd[0], tmp, sizeof(tmp))) > 0)
        on_data(tmp, 1, (size_t)n, &b);
    close(pfd[0]);
    int st;
    waitpid(pid, &st, 0);
    if (out)
        *out = b.p ? b.p : strdup("");
    else
        free(b.p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

pid_t th_serve(const char *eaid, const char *config, const char *logfile)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(logfile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (config)
            execl(eaid, eaid, "serve", "--config", config, (char *)NULL);
        else
            execl(eaid, eaid, "serve", (char *)NULL);
        _exit(127);
    }
    return pid;
}

int th_wait_up(const char *url, int timeout_ms)
{
    setenv("TH_QUIET", "1", 1);
    for (int waited = 0; waited < timeout_ms; waited += 50) {
        struct th_resp r;
        if (th_request("GET", url, NULL, NULL, 0, 0, &r) == 0 && r.status > 0) {
            th_resp_free(&r);
            unsetenv("TH_QUIET");
            return 0;
        }
        th_resp_free(&r);
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    unsetenv("TH_QUIET");
    return -1;
}

int th_stop(pid_t pid, int timeout_ms)
{
    if (pid <= 0)
        return -1;
    kill(pid, SIGTERM);
    int st;
    for (int waited = 0; waited < timeout_ms; waited += 20) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}
