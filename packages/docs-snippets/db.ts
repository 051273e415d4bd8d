// The application code the README snippets import from './db.js' (the reader's own data layer),
// copied next to the extracted snippets so they compile as written.
export async function countBookmarksInDb(): Promise<number> {
  return 42;
}

export async function loadUser(id: number): Promise<{ id: number; name: string }> {
  return { id, name: `user ${id}` };
}

export async function fetchTopPosts(_env?: unknown): Promise<{ id: number; title: string }[]> {
  return [{ id: 1, title: 'Cache stampedes, explained' }];
}
