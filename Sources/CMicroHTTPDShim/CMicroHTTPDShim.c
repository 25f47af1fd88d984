#include "CMicroHTTPDShim.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

struct MHD_Daemon *cmhd_start(int listen_fd, const struct cmhd_limits *limits,
                              MHD_AccessHandlerCallback handler, void *handler_cls,
                              MHD_RequestCompletedCallback completed, void *completed_cls) {
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
        { MHD_OPTION_END, 0, NULL },
        { MHD_OPTION_END, 0, NULL },
    };
    if (limits->thread_pool_size > 1) {
        options[6] = (struct MHD_OptionItem) { MHD_OPTION_THREAD_POOL_SIZE, (intptr_t) limits->thread_pool_size, NULL };
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
