/*
 * mpi-prime: counts the primes in [2, N] by trial division, the numbers dealt
 * out to the ranks in turn, with a global sum after every block of numbers
 * (seed 002's Prime_MPI: a fixed amount of work whose communication grows with
 * the ranks). Written for isolab.
 *
 * Usage: mpi-prime N
 * Prints one JSON object of isolab's `json` parser on rank 0's stdout:
 * execution_time (s, MPI_Wtime from a barrier after MPI_Init to the last
 * reduction), primes (the count: a check that every run did the same work),
 * ranks and reductions.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* Numbers per block between two global sums. */
#define BLOCK 2000

static int is_prime(long n)
{
    if (n < 2)
        return 0;
    for (long d = 2; d * d <= n; d++)
        if (n % d == 0)
            return 0;
    return 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    char *end = NULL;
    long n = argc == 2 ? strtol(argv[1], &end, 10) : 0;
    if (n < 2 || end == NULL || *end != '\0') {
        if (rank == 0)
            fprintf(stderr, "mpi-prime: usage: mpi-prime N (N >= 2, the largest number tested)\n");
        MPI_Finalize();
        return 2;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    long total = 0, reductions = 0;
    for (long lo = 2; lo <= n; lo += BLOCK) {
        long hi = lo + BLOCK - 1 < n ? lo + BLOCK - 1 : n;
        long mine = 0, sum = 0;
        for (long i = lo + rank; i <= hi; i += ranks)
            mine += is_prime(i);
        MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        total += sum;
        reductions++;
    }
    double elapsed = MPI_Wtime() - start;
    if (rank == 0)
        printf("{\"metrics\": ["
               "{\"name\": \"execution_time\", \"unit\": \"s\", \"direction\": \"lower\", \"value\": %.6f}, "
               "{\"name\": \"primes\", \"unit\": \"count\", \"direction\": \"higher\", \"value\": %ld}, "
               "{\"name\": \"ranks\", \"unit\": \"count\", \"direction\": \"higher\", \"value\": %d}, "
               "{\"name\": \"reductions\", \"unit\": \"count\", \"direction\": \"lower\", \"value\": %ld}]}\n",
               elapsed, total, ranks, reductions);
    MPI_Finalize();
    return 0;
}
