#ifndef USCHED_EXPORT_H
#define USCHED_EXPORT_H
/* Marks a public API function (the library is built with -fvisibility=hidden). */
#define USCHED_EXPORT __attribute__((visibility("default")))
#endif
