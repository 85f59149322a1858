export function findElectron(env?: NodeJS.ProcessEnv): { path: string | null; reason: string };
