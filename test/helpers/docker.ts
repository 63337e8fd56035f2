// testcontainers is imported lazily so runs that never need Docker do not pay for loading it.
export async function dockerIsAvailable(): Promise<boolean> {
  const { getContainerRuntimeClient } = await import('testcontainers');
  try {
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}
