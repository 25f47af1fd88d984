#define _GNU_SOURCE
#include "CMicroHTTPDShim.h"
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

/* MHD_OPTION_UNESCAPE_CALLBACK: leaves `s` as it is. libmicrohttpd would otherwise
   percent-decode the path before the access handler sees it (so `%2F` became a `/` that split
   the route, and `%00` cut the path short), and the query arguments too; the router decodes
   each path component, and HTTPServer each query argument, exactly once. libmicrohttpd still
   turns `+` into a space in query arguments (MHD_unescape_plus) before calling this, never
   in the path. */
static size_t cmhd_keep_escapes(void *cls, struct MHD_Connection *connection, char *s) {
    (void) cls;
    (void) connection;
    return strlen(s);
}

struct MHD_Daemon *cmhd_start(int listen_fd, const struct cmhd_limits *limits,
                              MHD_AccessHandlerCallback handler, void *handler_cls,
                              MHD_RequestCompletedCallback completed, void *completed_cls,
                              MHD_NotifyConnectionCallback connection, void *connection_cls) {
    /* MHD_USE_ITC: an eventfd wakes the threads, which MHD_quiesce_daemon needs (see
       cmhd_stop). */
    unsigned int flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC;
    /* The options as an array (MHD_OPTION_ARRAY) so the pool size can be left out: MHD
       refuses MHD_OPTION_THREAD_POOL_SIZE of 1. The port is ignored with a listen socket. */
    struct MHD_OptionItem options[] = {
        { MHD_OPTION_LISTEN_SOCKET, (intptr_t) listen_fd, NULL },
        { MHD_OPTION_CONNECTION_LIMIT, (intptr_t) limits->connection_limit, NULL },
        { MHD_OPTION_PER_IP_CONNECTION_LIMIT, (intptr_t) limits->per_ip_connection_limit, NULL },
        { MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t) limits->connection_timeout_seconds, NULL },
        { MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t) limits->connection_memory_limit, NULL },
        { MHD_OPTION_NOTIFY_COMPLETED, (intptr_t) completed, completed_cls },
        { MHD_OPTION_NOTIFY_CONNECTION, (intptr_t) connection, connection_cls },
        { MHD_OPTION_UNESCAPE_CALLBACK, (intptr_t) cmhd_keep_escapes, NULL },
        { MHD_OPTION_END, 0, NULL },
        { MHD_OPTION_END, 0, NULL },
    };
    if (limits->thread_pool_size > 1) {
        options[8] = (struct MHD_OptionItem) { MHD_OPTION_THREAD_POOL_SIZE, (intptr_t) limits->thread_pool_size, NULL };
    }
    return MHD_start_daemon(flags, 0, NULL, NULL, handler, handler_cls,
                            MHD_OPTION_ARRAY, options, MHD_OPTION_END);
}

int cmhd_client_address(struct MHD_Connection *connection, char *out, size_t size) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL || size == 0) return -1;
    const struct sockaddr *address = info->client_addr;
    const void *raw = NULL;
    if (address->sa_family == AF_INET) raw = &((const struct sockaddr_in *) address)->sin_addr;
    else if (address->sa_family == AF_INET6) raw = &((const struct sockaddr_in6 *) address)->sin6_addr;
    else return -1;
    return inet_ntop(address->sa_family, raw, out, (socklen_t) size) == NULL ? -1 : 0;
}

unsigned int cmhd_current_connections(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return info == NULL ? 0 : info->num_connections;
}

void cmhd_stop(struct MHD_Daemon *daemon) {
    MHD_socket listen_fd = MHD_quiesce_daemon(daemon);
    MHD_stop_daemon(daemon);
    if (listen_fd != MHD_INVALID_SOCKET) close(listen_fd);
}

int cmhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : (int) info->connect_fd;
}

int cmhd_epoll_create(void) {
    return epoll_create1(EPOLL_CLOEXEC);
}

int cmhd_epoll_add_wakeup(int epfd) {
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) return -1;
    struct epoll_event event = { .events = EPOLLIN, .data.u64 = 0 };
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int cmhd_epoll_watch_hangup(int epfd, int fd, uint64_t token) {
    struct epoll_event event = { .events = EPOLLRDHUP | EPOLLONESHOT, .data.u64 = token };
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event);
}

int cmhd_epoll_forget(int epfd, int fd) {
    struct epoll_event unused = { 0 };
    return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, &unused);
}

int cmhd_epoll_wait(int epfd, uint64_t *tokens, int max, int timeout_ms) {
    struct epoll_event events[64];
    if (max > 64) max = 64;
    int count = epoll_wait(epfd, events, max, timeout_ms);
    for (int i = 0; i < count; i++) tokens[i] = events[i].data.u64;
    return count;
}
