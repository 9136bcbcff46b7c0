// Elements above which a cold start is sent in pieces of about this size, by kproxy run and as
// render --chunks prints it (one number, so the two agree): with the element writer a piece is one
// nf_tables batch, which the kernel commits inside sendmsg, on the event loop's thread (~1 us per
// element: 354 ms for the 330k of 30k services x 10 endpoints), so a piece is about one slice
// (work-slices.ts) of it. The live dataplane cuts smaller pieces where one does not fit the
// socket's send buffer (live.ts). Alone in its module: the help text names it without loading
// the planner.
export const COLD_START_CHUNK = 10_000;
