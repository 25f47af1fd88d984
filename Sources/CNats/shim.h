// The NATS C client (libnats-dev), JetStream included.
#include <nats/nats.h>
