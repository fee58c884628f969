/*
 * mpi-search: searches [0, N) for the integer j whose hash f(j) equals a target,
 * the range cut into chunks that the ranks take in turn; after every round of
 * chunks the ranks agree, by a global reduction, whether one of them found it
 * (seed 002's MPI_Search: a parallel search whose communication dominates).
 * The target is f(N - 1), so every run searches the whole range: fixed work.
 * Written for isolab.
 *
 * Usage: mpi-search N
 * Prints one JSON object of isolab's `json` parser on rank 0's stdout:
 * execution_time (s, MPI_Wtime), found (the index: N - 1 unless the hash
 * collides earlier, the same in every run), ranks and rounds.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Integers per chunk: one chunk per rank per round. */
#define CHUNK 4096

/* A cheap mixing function (several rounds of a 32-bit integer hash). */
static uint32_t f(uint64_t j)
{
    uint32_t x = (uint32_t)(j ^ (j >> 32));
    for (int round = 0; round < 8; round++) {
        x ^= x >> 16;
        x *= 0x7feb352dU;
        x ^= x >> 15;
        x *= 0x846ca68bU;
        x ^= x >> 16;
    }
    return x;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    char *end = NULL;
    long long n = argc == 2 ? strtoll(argv[1], &end, 10) : 0;
    if (n < 1 || end == NULL || *end != '\0') {
        if (rank == 0)
            fprintf(stderr, "mpi-search: usage: mpi-search N (N >= 1, the size of the range)\n");
        MPI_Finalize();
        return 2;
    }
    uint32_t target = f((uint64_t)(n - 1));
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    long long found = -1, rounds = 0;
    for (long long base = 0; base < n && found < 0; base += (long long)CHUNK * ranks) {
        long long lo = base + (long long)rank * CHUNK, mine = -1;
        for (long long j = lo; j < lo + CHUNK && j < n; j++)
            if (f((uint64_t)j) == target) {
                mine = j;
                break;
            }
        /* The smallest index any rank found this round, or -1: LLONG_MAX stands for none. */
        long long candidate = mine < 0 ? 0x7fffffffffffffffLL : mine, least;
        MPI_Allreduce(&candidate, &least, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
        if (least != 0x7fffffffffffffffLL)
            found = least;
        rounds++;
    }
    double elapsed = MPI_Wtime() - start;
    if (rank == 0)
        printf("{\"metrics\": ["
               "{\"name\": \"execution_time\", \"unit\": \"s\", \"direction\": \"lower\", \"value\": %.6f}, "
               "{\"name\": \"found\", \"unit\": \"index\", \"direction\": \"higher\", \"value\": %lld}, "
               "{\"name\": \"ranks\", \"unit\": \"count\", \"direction\": \"higher\", \"value\": %d}, "
               "{\"name\": \"rounds\", \"unit\": \"count\", \"direction\": \"lower\", \"value\": %lld}]}\n",
               elapsed, found, ranks, rounds);
    MPI_Finalize();
    return found < 0 ? 1 : 0;
}
