/* Remote manifest repositories: push and fetch dataset refs (placeholder). */
#ifndef KILN_MANIFEST_REMOTE_H
#define KILN_MANIFEST_REMOTE_H
#endif
