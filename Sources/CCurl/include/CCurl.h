#ifndef CCURL_H
#define CCURL_H
#include <curl/curl.h>
/* Typed, non-variadic wrappers for libcurl calls Swift cannot import (variadic setopt/getinfo). */
CURLcode ccurl_setopt_long(CURL *easy, CURLoption option, long value);
CURLcode ccurl_setopt_string(CURL *easy, CURLoption option, const char *value);
CURLcode ccurl_setopt_pointer(CURL *easy, CURLoption option, void *value);
CURLcode ccurl_setopt_off_t(CURL *easy, CURLoption option, curl_off_t value);
CURLcode ccurl_setopt_write_callback(CURL *easy, size_t (*callback)(char *, size_t, size_t, void *));
CURLcode ccurl_setopt_xferinfo_callback(CURL *easy, int (*callback)(void *, curl_off_t, curl_off_t, curl_off_t, curl_off_t));
CURLcode ccurl_setopt_header_callback(CURL *easy, size_t (*callback)(char *, size_t, size_t, void *));
CURLcode ccurl_setopt_opensocket_callback(CURL *easy, curl_socket_t (*callback)(void *, curlsocktype, struct curl_sockaddr *));
CURLcode ccurl_getinfo_long(CURL *easy, CURLINFO info, long *value);
CURLcode ccurl_getinfo_string(CURL *easy, CURLINFO info, const char **value);
CURLcode ccurl_getinfo_double(CURL *easy, CURLINFO info, double *value);
CURLcode ccurl_getinfo_off_t(CURL *easy, CURLINFO info, curl_off_t *value);
CURLcode ccurl_getinfo_pointer(CURL *easy, CURLINFO info, void **value);

/* Multi interface: variadic setopt, and the union inside CURLMsg. */
CURLMcode ccurl_multi_setopt_long(CURLM *multi, CURLMoption option, long value);
/* Reads one finished transfer; returns 1 and fills easy/result, or 0 when none is left. */
int ccurl_multi_next_done(CURLM *multi, CURL **easy, CURLcode *result);
/* The IP address curl is about to connect to, in network order: 4 bytes for IPv4, 16 for IPv6,
   0 (nothing written) for any other family. For the SSRF checks of the open-socket callbacks. */
int ccurl_sockaddr_ip(const struct curl_sockaddr *address, unsigned char out[16]);
#define CCURL_SOCKET_BAD CURL_SOCKET_BAD
/* POST helpers for the outbox. */
#include "CCurlPost.h"
#endif
