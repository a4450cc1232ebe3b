#include "ocslab/probes/probe.h"
