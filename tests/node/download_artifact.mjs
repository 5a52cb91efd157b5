// Find an artifact of the current run by name and download + unzip it with the official client.
//
// Usage: node download_artifact.mjs <artifact-name> <directory>
// Configuration comes from the environment, exactly as in a workflow step: ACTIONS_RUNTIME_TOKEN,
// ACTIONS_RESULTS_URL (and GITHUB_SERVER_URL, which must not look like GHES).
// On success the last stdout line is a JSON object: {id, name, size, digest, downloadPath, digestMismatch}.
// Any failure exits 1 with the error on stderr.
import { DefaultArtifactClient } from '@actions/artifact';

async function main(argv) {
  const [name, directory] = argv;
  if (!name || !directory) {
    throw new Error('usage: node download_artifact.mjs <artifact-name> <directory>');
  }
  const client = new DefaultArtifactClient();
  const { artifact } = await client.getArtifact(name);
  const options = { path: directory };
  if (artifact.digest) {
    options.expectedHash = artifact.digest;
  }
  const { downloadPath, digestMismatch } = await client.downloadArtifact(artifact.id, options);
  const summary = {
    id: artifact.id,
    name: artifact.name,
    size: artifact.size,
    digest: artifact.digest ?? null,
    downloadPath,
    digestMismatch: Boolean(digestMismatch),
  };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
}

main(process.argv.slice(2)).catch((error) => {
  process.stderr.write(`download_artifact: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
