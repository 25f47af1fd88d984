#include <netinet/in.h>
#include <string.h>
#include "CCurl.h"

CURLcode ccurl_setopt_long(CURL *easy, CURLoption option, long value) { return curl_easy_setopt(easy, option, value); }
CURLcode ccurl_setopt_string(CURL *easy, CURLoption option, const char *value) { return curl_easy_setopt(easy, option, value); }
CURLcode ccurl_setopt_pointer(CURL *easy, CURLoption option, void *value) { return curl_easy_setopt(easy, option, value); }
CURLcode ccurl_setopt_off_t(CURL *easy, CURLoption option, curl_off_t value) { return curl_easy_setopt(easy, option, value); }
CURLcode ccurl_setopt_write_callback(CURL *easy, size_t (*callback)(char *, size_t, size_t, void *)) { return curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, callback); }
CURLcode ccurl_setopt_xferinfo_callback(CURL *easy, int (*callback)(void *, curl_off_t, curl_off_t, curl_off_t, curl_off_t)) { return curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, callback); }
CURLcode ccurl_setopt_header_callback(CURL *easy, size_t (*callback)(char *, size_t, size_t, void *)) { return curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, callback); }
CURLcode ccurl_setopt_opensocket_callback(CURL *easy, curl_socket_t (*callback)(void *, curlsocktype, struct curl_sockaddr *)) { return curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, callback); }
CURLcode ccurl_getinfo_long(CURL *easy, CURLINFO info, long *value) { return curl_easy_getinfo(easy, info, value); }
CURLcode ccurl_getinfo_string(CURL *easy, CURLINFO info, const char **value) { return curl_easy_getinfo(easy, info, value); }
CURLcode ccurl_getinfo_double(CURL *easy, CURLINFO info, double *value) { return curl_easy_getinfo(easy, info, value); }
CURLcode ccurl_getinfo_off_t(CURL *easy, CURLINFO info, curl_off_t *value) { return curl_easy_getinfo(easy, info, value); }
CURLcode ccurl_getinfo_pointer(CURL *easy, CURLINFO info, void **value) { return curl_easy_getinfo(easy, info, value); }

CURLMcode ccurl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) { return curl_multi_setopt(multi, option, value); }

int ccurl_multi_next_done(CURLM *multi, CURL **easy, CURLcode *result) {
    int left = 0;
    CURLMsg *message;
    while ((message = curl_multi_info_read(multi, &left)) != NULL) {
        if (message->msg == CURLMSG_DONE) {
            *easy = message->easy_handle;
            *result = message->data.result;
            return 1;
        }
    }
    return 0;
}

int ccurl_sockaddr_ip(const struct curl_sockaddr *address, unsigned char out[16]) {
    if (address->family == AF_INET && address->addrlen >= sizeof(struct sockaddr_in)) {
        memcpy(out, &((const struct sockaddr_in *)&address->addr)->sin_addr, 4);
        return 4;
    }
    if (address->family == AF_INET6 && address->addrlen >= sizeof(struct sockaddr_in6)) {
        memcpy(out, &((const struct sockaddr_in6 *)&address->addr)->sin6_addr, 16);
        return 16;
    }
    return 0;
}
